# bench/walk/stages.py TRACE: the pipeline stages one request visited, in
# order, from the dlv trace bench/walk/walk.sh wrote. Each traced function
# is given to a stage (admit, route, wait, call, settle, ingress) by name;
# reads of health and of the snapshot count for no stage; capacity calls
# after the call are the claim's release (settle). A stage entered again
# after another ran is a re-entry; admit work done after admission is
# listed by name.
import re, sys
STAGES = [
 ('admit', r'pipeline\.(admit|\(\*Handler\)\.admit|\(\*Snapshot\)\.(admit|keyActive|Task|resolveProfile|class|policyClass|policy|ownerOf|ownLevel|limitsOf|Limits|placeLimits|fallbackLimits|callPolicy|ownsRoute)|\(\*admission\)\.(scope|resolveProfile|derive|claim)|\(\*Handler\)\.charge|\(\*charging\)\.limits)$'),
 ('route', r'pipeline\.(\(\*Handler\)\.(previousResponse|route|startAffinity)|\(\*routePolicy\)\.allows|ownership|pinned|\(\*Snapshot\)\.affinityOf)$|^routing\.'),
 ('wait', r'pipeline\.(\(\*Handler\)\.(call|order|unusable|granted|affinityGranted)|\(\*attempts\)\.(start|ticket|preferred|plan|plan-fm|grant|waitFailed)|\(\*Snapshot\)\.(Wait|Weight|Candidate|edgeLimits|AliasDomain)|waitFor|\(\*affinity\)\.holds|\(\*routePolicy\)\.binds|ruledOut|\(\*Handler\)\.call\.func1)$|^capacity\.|^store/'),
 ('call', r'pipeline\.(\(\*Handler\)\.(run|execute)|\(\*Handler\)\.Serve\.func3|\(\*Snapshot\)\.BreakerSettings)$|^upstream\.|^adapter|^protocol/'),
 ('settle', r'pipeline\.(\(\*Handler\)\.(settle|countCached)|\(\*Handler\)\.Serve\.func2|answered|attemptRoute\.stamp|\(\*Outcome\)\.answer|\(\*affinity\)\.placement|\(\*compiledBilling\)\.costTable|\(\*charging\)\.settle|\(\*Handler\)\.execute\.func1|outcome|\(\*Handler\)\.run\.deferwrap1|\(\*attempts\)\.ran)$|^settle\.'),
 ('ingress', r'^ingress\.|^authn\.'),
]
NEUTRAL = r'pipeline\.(\(\*Live\)\.Load|\(\*admission\)\.key|\(\*Handler\)\.(Serve|begin))$|^routing\.\(\*Table\)\.(Alias|InFlight)|^ingress\.\(\*recorder\)\.|^sync/atomic|^type:|^capacity\.get$|pipeline\.\(\*Handler\)\.outOfService$|^capacity\.\(\*Statuses\)\.'
def names(path):
    lines = open(path).read().splitlines()
    g = None
    for l in lines:
        m = re.match(r'> goroutine\((\d+)\): github.com/sluicehq/sluice/internal/ingress\.\(\*Server\)\.ServeHTTP', l)
        if m: g = m.group(1); break
    out, p = [], '> goroutine(' + g + '): '
    for l in lines:
        if not l.startswith(p): continue
        r, d = l[len(p):], 0
        for i in range(len(r) - 1, -1, -1):
            if r[i] == ')': d += 1
            elif r[i] == '(':
                d -= 1
                if d == 0: out.append(r[:i].replace('github.com/sluicehq/sluice/internal/', '')); break
    return out
seq, unknown = [], set()
for n in names(sys.argv[1]):
    if re.search(NEUTRAL, n): continue
    st = next((s for s, rx in STAGES if re.search(rx, n)), None)
    if st == 'wait' and any(x == 'call' for x, _ in seq) and re.match(r'(capacity|store/)', n):
        st = 'settle'  # the claim's release, after the call
    if st is None: unknown.add(n); continue
    if not seq or seq[-1][0] != st: seq.append([st, []])
    seq[-1][1].append(n)
print(' → '.join(s for s, _ in seq))
print('stage visits:', len(seq), ' re-entries:', len(seq) - len({s for s, _ in seq}))
for s, ns in seq:
    if s == 'admit' and seq.index([s, ns]) > 1: print('  admit work re-done after admission:', ', '.join(x.split('.', 1)[1] for x in ns))
if unknown: print('unclassified:', sorted(unknown))
