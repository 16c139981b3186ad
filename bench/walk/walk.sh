#!/usr/bin/env bash
# bench/walk/walk.sh: the walk of one request. Builds the gateway of the
# checkout TREE (default: this one) without inlining, runs it under
# `dlv trace` against the simulated upstream, sends one non-streaming chat
# completion, and writes every call it made into Sluice's packages to OUT
# (default walk.txt); `python3 bench/walk/stages.py OUT` then prints the
# stages the request visited, in order. Needs dlv
# (go install github.com/go-delve/delve/cmd/dlv@latest) and curl.
#
# Usage: bash bench/walk/walk.sh [TREE] [OUT]
set -uo pipefail
TREE=${1:-$(cd "$(dirname "$0")/../.." && pwd)}; OUT=${2:-walk.txt}
DLV=$(command -v dlv || echo "$(go env GOPATH)/bin/dlv")
PORT=${PORT:-18777}
W=$(mktemp -d)
(cd $TREE && go build -gcflags='all=-N -l' -o $W/sluice ./cmd/sluice) || exit 1
export BENCH_KEY=sk-bench-key-0123456789 BENCH_UPSTREAM_SECRET=sk-up BENCH_ADMIN_TOKEN=admintoken0123456789
$W/sluice demo-upstream --listen 127.0.0.1:0 --latency 0s > $W/up.out 2>&1 &
UPID=$!
sleep 1
UP=$(grep -o 'listening on [^ ]*' $W/up.out | head -1 | awk '{print $3}'); UP=${UP#http://}
cat > $W/c.yaml <<EOC
version: 1
server:
  listen: 127.0.0.1:$PORT
database: {url: "sqlite://$W/s.db"}
endpoints:
  - id: sim
    base_url: http://$UP
    protocols: [openai.chat]
credentials:
  - {id: sim-1, secret_env: BENCH_UPSTREAM_SECRET, endpoints: [sim], max_inflight: 1000000}  # uncapped: the walk measures the gateway
models:
  - alias: bench
    deployments:
      - {model: gpt-4o-mini, endpoints: [sim]}
keys:
  - {id: bench, tenant: bench, secret_env: BENCH_KEY}
EOC
RE='github.com/sluicehq/sluice/internal/(ingress|pipeline|routing|capacity|upstream|settle|authn|protocol/[a-z]+|adapter[a-z/]*|store/memstore)\.'
"$DLV" trace --exec $W/sluice --stack 0 "$RE" -- serve --config $W/c.yaml > $W/trace.txt 2>&1 &
DPID=$!
for i in $(seq 300); do curl -s -o /dev/null http://127.0.0.1:$PORT/health 2>/dev/null && break; sleep 0.2; done
sleep 3
sleep 0.5; L0=$(wc -l < $W/trace.txt)
curl -s -H "Authorization: Bearer $BENCH_KEY" -H 'Content-Type: application/json' -d '{"model":"bench","messages":[{"role":"user","content":"hi"}]}' http://127.0.0.1:$PORT/v1/chat/completions > $W/answer.txt
sleep 2
L1=$(wc -l < $W/trace.txt)
kill -INT $DPID; sleep 1; kill $DPID $UPID 2>/dev/null; pkill -f "$W/sluice" 2>/dev/null
sed -n "$((L0+1)),${L1}p" $W/trace.txt > "$OUT"
grep -q chat.completion $W/answer.txt || { echo "the request failed: $(head -c 300 $W/answer.txt)" >&2; exit 1; }
rm -rf $W
