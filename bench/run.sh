#!/usr/bin/env bash
# bench/run.sh: Sluice against a bare httputil.ReverseProxy hop (bench/bareproxy)
# in front of the same simulated upstream (`sluice demo-upstream`), in one run.
#
# Each proxy in turn runs alone on core $PROXY_CPU; the upstream, wrk and the
# streaming client share core $LOAD_CPU. For each proxy:
#   1. warm-up, then wrk -t2 -c$CONNS -d$DURATION -s post.lua (non-streaming
#      chat completions): requests/s, latency p50/p99, the proxy's CPU seconds
#      during the measured run (utime+stime from /proc/PID/stat) per request,
#      its RSS, and how busy each core was;
#   2. bench/ttfb: $TTFB_CONC concurrent streams for $TTFB_DURATION against an
#      upstream that spaces events by $CHUNK_DELAY: time to first event
#      p50/p99, and events merged or held back (target 0).
# With STREAM=1 the load is streams instead (CPU per stream is the target,
# 1.15x the bare hop's): wrk -s stream.lua, each request a streamed chat
# completion of $STREAM_TOKENS words with usage (20 events), the upstream
# spacing events by $CHUNK_DELAY (5ms by default in this mode, so each event
# reaches the proxy on a read of its own) from $CONNS connections (256 by
# default), enough streams at once to keep the proxy's core about half busy
# without saturating it; the streaming-client run (2.) is left out, and
# "req/s" and the latencies are of whole streams.
# Variants: bare, sluice-info (access log on, to /dev/null: what `sluice serve`
# does by default, so what production runs), sluice-warn (no access log) and
# sluice-redis (sluice-info with `state.backend: redis`). For sluice-redis the
# script starts a private redis-server on a free port (`--save "" --appendonly
# no`), pinned to core $LOAD_CPU (on two cores, the gateway's is the only other
# one), and reports Redis's cost per request: script calls (FCALL and EVALSHA)
# and their time (`INFO commandstats`, reset with CONFIG RESETSTAT before the
# measured run: usec_per_call x calls per request) and the redis-server process's CPU; and,
# when sluice-info ran too, its CPU/req and throughput against it (issue #16
# targets: Redis script time <= 20 µs/req, CPU/req <= 1.3x sluice-info's,
# throughput >= 0.6x bare's). sluice-billed is sluice-info with its key bound to
# a billing account (a plan pricing the alias, the model costed, a top-up far
# above what the run spends): every request is admitted on the balance view,
# priced, and its charge written with its usage record; it is reported against
# sluice-info (issue #12: CPU/req <= 1.05x the unbilled gateway's).
# Rounds alternate the order of the variants to cancel drift.
# With PAIRED=N the variants run side by side instead: every proxy is started
# once, all on core $PROXY_CPU, then N windows of wrk ($DURATION each; 5s
# suits) go to each in turn, the order alternating, each window's CPU/req
# read from the proxy's own ticks (0.5 s after wrk ends, so the usage
# records it wrote are counted). Between two windows of one variant the
# others ran, so slow drift of the machine falls on all of them alike;
# CPU/req is the sum of ticks over the sum of requests. This is how the
# billed/unbilled ratio is best measured here: rounds with a new process
# each move by more than the 5 % sought. No streaming run in this mode.
# With TOGETHER=1 as well, each window loads every variant at once (one wrk
# each, all on core $LOAD_CPU, the gateways sharing core $PROXY_CPU): what
# disturbs the machine during a window disturbs every variant alike, where
# windows in turn see it come and go between them.
# Variants of different speeds (bare and sluice-info) sharing a core that
# way run at different rates, and a proxy's CPU per request falls as its
# rate rises: PACE=<ms> holds each wrk connection that long before each
# request (see post.lua), so that every variant runs at about
# CONNS × 1000 / PACE requests a second, below what either can do.
#
# Usage: bash bench/run.sh           (from anywhere; needs go, wrk, taskset)
#        STREAM=1 QUIET_WAIT=0 bash bench/run.sh   (streams; QUIET_WAIT=0 measures at once)
# Environment: DURATION=15s ROUNDS=2 WARMUP=3s CONNS=64 TTFB_DURATION=10s
#   TTFB_CONC=16 TTFB_TOKENS=16 CHUNK_DELAY=20ms VARIANTS="bare sluice-info sluice-warn"
#   (add sluice-redis, e.g. VARIANTS="bare sluice-info sluice-redis"; needs redis-server and redis-cli;
#   add sluice-billed, e.g. VARIANTS="sluice-info sluice-billed"; needs curl)
#   STREAM=0 STREAM_TOKENS=16 (with STREAM=1: CONNS=256 CHUNK_DELAY=5ms)
#   PAIRED=0 (N > 0: N side-by-side windows per variant, e.g.
#   PAIRED=24 DURATION=5s VARIANTS="sluice-info sluice-billed"; a variant given
#   twice, VARIANTS="sluice-info sluice-info", measures the method against itself)
#   PROXY_CPU=0 LOAD_CPU=1 QUIET=10 QUIET_WAIT=120 (see wait_quiet) NOISY=15 RETRIES=2
#   (see run_variant) PROFILE_DIR= (when set: `perf record -g` of Sluice during each
#   wrk run, written there; profiling slows Sluice, so profile in a run of its own:
#   PROFILE_DIR=/tmp/prof ROUNDS=1 VARIANTS=sluice-info bash bench/run.sh, then
#   perf report -i /tmp/prof/perf-sluice-info-1.data --children --sort symbol)
set -euo pipefail

STREAM=${STREAM:-0}
DURATION=${DURATION:-15s}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-3s}
if [[ $STREAM == 1 ]]; then
	CONNS=${CONNS:-256}
	CHUNK_DELAY=${CHUNK_DELAY:-5ms}
	LOAD=stream.lua
else
	CONNS=${CONNS:-64}
	LOAD=post.lua
fi
export STREAM_TOKENS=${STREAM_TOKENS:-16} # stream.lua reads it
TTFB_DURATION=${TTFB_DURATION:-10s}
TTFB_CONC=${TTFB_CONC:-16}
TTFB_TOKENS=${TTFB_TOKENS:-16}
CHUNK_DELAY=${CHUNK_DELAY:-20ms}
VARIANTS=${VARIANTS:-"bare sluice-info sluice-warn"}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
QUIET=${QUIET:-10}
QUIET_WAIT=${QUIET_WAIT:-120}
NOISY=${NOISY:-15}
RETRIES=${RETRIES:-2}
PROFILE_DIR=${PROFILE_DIR:-}
PAIRED=${PAIRED:-0}
TOGETHER=${TOGETHER:-0}
PACE_MS=${PACE:-0}
export PACE_MS # post.lua reads it

die() { echo "run.sh: $*" >&2; exit 1; }

for tool in go taskset timeout awk; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
command -v wrk >/dev/null || die "wrk not found; install it with: apt-get install -y wrk"
VARIANTS=" $VARIANTS "
if [[ $VARIANTS == *" sluice-billed "* ]]; then
	command -v curl >/dev/null || die "sluice-billed needs curl; install it with: apt-get install -y curl"
fi
if [[ $VARIANTS == *" sluice-redis "* ]]; then
	for tool in redis-server redis-cli; do
		command -v "$tool" >/dev/null || die "sluice-redis needs $tool; install it with: apt-get install -y redis-server"
	done
fi
if [[ -n $PROFILE_DIR ]]; then
	command -v perf >/dev/null || die "PROFILE_DIR needs perf (apt-get install -y linux-perf)"
	mkdir -p "$PROFILE_DIR"
	PROFILE_DIR=$(cd "$PROFILE_DIR" && pwd)
fi

# seconds turns 15s / 15 / 1m into whole seconds, for the timeouts.
seconds() {
	case $1 in
	*ms) echo 1 ;;
	*s) echo "${1%s}" ;;
	*m) echo $((${1%m} * 60)) ;;
	*) echo "$1" ;;
	esac
}
DUR_S=$(seconds "$DURATION")
TTFB_S=$(seconds "$TTFB_DURATION")
[[ $DUR_S =~ ^[0-9]+$ && $TTFB_S =~ ^[0-9]+$ ]] || die "DURATION and TTFB_DURATION must be whole seconds, like 15s"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench.XXXXXX")
PIDS=()

cleanup() {
	local status=$? pid
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
	if ((status == 0)); then
		rm -rf "$WORK"
	else
		echo "run.sh: failed; logs kept in $WORK" >&2
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# stop ends one process this script started.
stop() {
	local pid=$1
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	local keep=() p
	for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}

# address waits (10s at most) for a line matching the regex $2 in file $1
# and prints the host:port that follows http://.
address() {
	local file=$1 pattern=$2 pid=$3 addr
	for _ in $(seq 100); do
		addr=$(grep -oE "$pattern"'http://[0-9.:]+' "$file" 2>/dev/null | head -1 | sed 's|.*http://||') || true
		[[ -n $addr ]] && { echo "$addr"; return 0; }
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$file" >&2
	return 1
}

# cputicks prints utime+stime of a process, in clock ticks.
cputicks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
# corestat prints "busy total" jiffies of one CPU from /proc/stat.
corestat() { awk -v c="cpu$1" '$1 == c { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
# proctime prints user+nice+system jiffies of the whole machine and the total.
proctime() { awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print $2 + $3 + $4, t }' /proc/stat; }
# childticks prints the CPU ticks of this script's reaped descendants (wrk).
childticks() { awk '{ sub(/.*\) /, ""); print $14 + $15 }' "/proc/$$/stat"; }
CLK_TCK=$(getconf CLK_TCK)
NCPU=$(nproc)

# wait_quiet waits until the rest of the machine has been idle for 3 seconds
# in a row (under $QUIET% of one core; our upstream is idle between
# measurements), at most $QUIET_WAIT seconds: other work on a shared machine
# skews every figure.
wait_quiet() {
	local a b busy waited=0 quiet=0
	while ((quiet < 3)); do
		a=$(proctime)
		sleep 1
		b=$(proctime)
		busy=$(awk -v a="$a" -v b="$b" -v n="$NCPU" 'BEGIN { split(a, x, " "); split(b, y, " "); printf "%.0f", 100 * n * (y[1] - x[1]) / (y[2] - x[2]) }')
		if ((busy < QUIET)); then
			quiet=$((quiet + 1))
			continue
		fi
		quiet=0
		if ((waited >= QUIET_WAIT)); then
			echo "   the machine is still busy (${busy}% of a core) after ${QUIET_WAIT}s; measuring anyway" >&2
			return 0
		fi
		((waited == 0)) && echo "   waiting for the machine to be idle (${busy}% of a core busy)"
		waited=$((waited + 1))
	done
}

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(uname -sr)"
echo "   $(go version), $(wrk --version 2>&1 | head -1 | awk '{ print $1, $2 }'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== building into $WORK"
(cd "$ROOT" && go build -o "$WORK/sluice" ./cmd/sluice && go build -o "$WORK/bareproxy" ./bench/bareproxy &&
	go build -o "$WORK/ttfb" ./bench/ttfb) || die "build failed"

echo "== starting the simulated upstream on core $LOAD_CPU (chunk delay $CHUNK_DELAY)"
taskset -c "$LOAD_CPU" "$WORK/sluice" demo-upstream --listen 127.0.0.1:0 --latency 0s --chunk-delay "$CHUNK_DELAY" \
	>"$WORK/upstream.out" 2>&1 &
UPSTREAM_PID=$!
PIDS+=("$UPSTREAM_PID")
UPSTREAM=$(address "$WORK/upstream.out" 'listening on ' "$UPSTREAM_PID") || die "upstream did not start"
echo "   http://$UPSTREAM"

# start_redis starts the private redis-server of sluice-redis on core
# $LOAD_CPU, on the first free port from a random start; sets REDIS_PID and
# REDIS_PORT.
start_redis() {
	local port
	for _ in $(seq 20); do
		port=$((20000 + RANDOM % 20000))
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue # taken
		taskset -c "$LOAD_CPU" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
			>"$WORK/redis.out" 2>&1 &
		REDIS_PID=$!
		PIDS+=("$REDIS_PID")
		for _ in $(seq 50); do
			if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
				REDIS_PORT=$port
				return 0
			fi
			kill -0 "$REDIS_PID" 2>/dev/null || break
			sleep 0.1
		done
		stop "$REDIS_PID"
	done
	cat "$WORK/redis.out" >&2
	return 1
}
REDIS_PID= REDIS_PORT=
if [[ $VARIANTS == *" sluice-redis "* ]]; then
	start_redis || die "redis-server did not start"
	echo "== private redis-server $(redis-server --version | awk '{ print $3 }') on core $LOAD_CPU, port $REDIS_PORT"
fi

BENCH_KEY="sk-sluice-bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export BENCH_KEY # post.lua reads it
BENCH_UPSTREAM_SECRET="sk-bench-upstream-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
BENCH_ADMIN_TOKEN="bench-admin-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"

# catalog writes the Sluice catalog of one run: one endpoint (the simulated
# upstream), one credential, the alias "bench", one static virtual key; secrets
# come from the environment; SQLite in the work directory; with a third
# argument (a Redis URL), the shared state in that Redis; with a fourth
# (billed), the key bound to the billing account "bench" (see sluice-billed).
catalog() {
	cat >"$1" <<EOF
version: 1
$([[ -n ${3:-} ]] && printf 'state:\n  backend: redis\n  redis: {url: "%s", prefix: "bench:"}\n' "$3")
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: BENCH_ADMIN_TOKEN
database: {url: "sqlite://$2"}
endpoints:
  - id: sim
    base_url: http://$UPSTREAM
    protocols: [openai.chat]
credentials:
  - {id: sim-1, secret_env: BENCH_UPSTREAM_SECRET, endpoints: [sim], max_inflight: 1000000}  # uncapped: the bench measures the gateway
models:
  - alias: bench
    deployments:
      - {model: gpt-4o-mini, endpoints: [sim]}
keys:
  - {id: bench, tenant: bench, secret_env: BENCH_KEY$([[ -n ${4:-} ]] && printf ', billing_account: bench')}
EOF
	if [[ -n ${4:-} ]]; then
		cat "$ROOT/bench/billing.yaml" >>"$1"
	fi
}

# fund_billed tops up the billing account of sluice-billed at admin address
# $1 and waits (10s at most) until the gateway at $2 admits a request: its
# balance view reads the store every second.
fund_billed() {
	curl -fsS -o /dev/null -X POST -H "Authorization: Bearer $BENCH_ADMIN_TOKEN" -H 'Content-Type: application/json' \
		-d '{"amount":"1000000000.00"}' "http://$1/admin/billing/accounts/bench/topup" || die "top-up failed"
	for _ in $(seq 100); do
		curl -fsS -o /dev/null -H "Authorization: Bearer $BENCH_KEY" -H 'Content-Type: application/json' \
			-d '{"model":"bench","messages":[{"role":"user","content":"hi"}]}' "http://$2/v1/chat/completions" 2>/dev/null && return 0
		sleep 0.1
	done
	die "sluice-billed still refuses requests 10s after its top-up"
}

# start_proxy starts variant $1 (run tag $2) on core $PROXY_CPU; sets PROXY_PID
# and PROXY_ADDR.
start_proxy() {
	local variant=$1 tag=$2 out="$WORK/$1-$2.out"
	case $variant in
	bare)
		taskset -c "$PROXY_CPU" "$WORK/bareproxy" --listen 127.0.0.1:0 --upstream "http://$UPSTREAM" >"$out" 2>"$WORK/$variant-$tag.err" &
		PROXY_PID=$!
		PIDS+=("$PROXY_PID")
		PROXY_ADDR=$(address "$out" 'listening on ' "$PROXY_PID") || die "bareproxy did not start"
		;;
	sluice-info | sluice-warn | sluice-redis | sluice-billed)
		local level=${variant#sluice-} err=/dev/null redis_url= billed=
		[[ $level == warn ]] && err="$WORK/$variant-$tag.err" # warnings would mean trouble: keep them
		if [[ $variant == sluice-redis ]]; then
			level=info
			redis_url="redis://127.0.0.1:$REDIS_PORT/0"
			redis-cli -p "$REDIS_PORT" flushall >/dev/null # each run starts from empty state
		fi
		if [[ $variant == sluice-billed ]]; then
			level=info billed=billed
		fi
		catalog "$WORK/$variant-$tag.yaml" "$WORK/$variant-$tag.db" "$redis_url" "$billed"
		BENCH_UPSTREAM_SECRET=$BENCH_UPSTREAM_SECRET BENCH_ADMIN_TOKEN=$BENCH_ADMIN_TOKEN \
			taskset -c "$PROXY_CPU" "$WORK/sluice" serve --config "$WORK/$variant-$tag.yaml" --log-level "$level" >"$out" 2>"$err" &
		PROXY_PID=$!
		PIDS+=("$PROXY_PID")
		PROXY_ADDR=$(address "$out" 'data plane +' "$PROXY_PID") || die "sluice did not start"
		if [[ -n $billed ]]; then
			fund_billed "$(address "$out" 'admin +' "$PROXY_PID")" "$PROXY_ADDR"
		fi
		;;
	*) die "unknown variant $variant" ;;
	esac
}

# wrk_ms converts a wrk duration (123.45us, 1.2ms, 2.01s) to milliseconds.
wrk_ms() { awk -v v="$1" 'BEGIN { u = v; sub(/[0-9.]+/, "", u); n = v + 0;
	printf "%.3f", u == "us" ? n / 1000 : u == "ms" ? n : u == "s" ? n * 1000 : u == "m" ? n * 60000 : n }'; }

# variant round rps p50 p99 cpu_us rss_kib core0 core1 ttfb50 ttfb99 merged streams errors non2xx incomplete proxy_pct
# foreign (during wrk) foreign_s (during the streaming run) evalsha_per_req script_us_per_call redis_cpu_us (sluice-redis)
RESULTS="$WORK/results.tsv"
: >"$RESULTS"

# alive fails the run, with the end of its log, when process $1 ($2) is gone.
alive() {
	kill -0 "$1" 2>/dev/null && return 0
	tail -n 20 "$3" >&2 2>/dev/null
	die "$2 (pid $1) has exited"
}

# pct prints 100 * (b1 - a1) / (b2 - a2) for two "busy total" samples.
pct() { awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); printf "%.0f", 100 * (y[1] - x[1]) / (y[2] - x[2]) }'; }

# others prints, as a share of one core, the CPU (user+system) that processes
# other than ours used between machine samples $1 and $2, ours being $3 ticks.
others() { awk -v a="$1" -v b="$2" -v n="$NCPU" -v ours="$3" 'BEGIN { split(a, x, " "); split(b, y, " ");
	f = 100 * n * (y[1] - x[1] - ours) / (y[2] - x[2]); printf "%.0f", f < 0 ? 0 : f }'; }

# measure runs the warm-up, the wrk run and the streaming run against the
# proxy once, and sets the figures of run_variant.
measure() {
	local variant=$1 round=$2 url=$3 out="$WORK/wrk-$1-$2.txt"
	local t0 t1 c0 c1 l0 l1 u0 u1 k0 k1 m0 m1 requests
	alive "$UPSTREAM_PID" upstream "$WORK/upstream.out"
	alive "$PROXY_PID" "$variant" "$WORK/$variant-$round.err"
	timeout $(($(seconds "$WARMUP") + 30)) taskset -c "$LOAD_CPU" wrk -t2 -c"$CONNS" -d"$WARMUP" -s "$ROOT/bench/$LOAD" "$url" >/dev/null
	local r0=0 r1=0
	if [[ $variant == sluice-redis ]]; then
		alive "$REDIS_PID" redis-server "$WORK/redis.out"
		redis-cli -p "$REDIS_PORT" config resetstat >/dev/null
		r0=$(cputicks "$REDIS_PID")
	fi
	c0=$(corestat "$PROXY_CPU"); l0=$(corestat "$LOAD_CPU"); t0=$(cputicks "$PROXY_PID")
	u0=$(cputicks "$UPSTREAM_PID"); k0=$(childticks); m0=$(proctime)
	local perf_pid=
	if [[ -n $PROFILE_DIR && $variant != bare ]]; then
		perf record -q -F 999 -g -p "$PROXY_PID" -o "$PROFILE_DIR/perf-$variant-$round.data" -- sleep $((DUR_S > 3 ? DUR_S - 2 : 1)) \
			>/dev/null 2>&1 &
		perf_pid=$!
	fi
	timeout $((DUR_S + 30)) taskset -c "$LOAD_CPU" wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s "$ROOT/bench/$LOAD" "$url" >"$out"
	[[ -n $perf_pid ]] && wait "$perf_pid"
	t1=$(cputicks "$PROXY_PID"); c1=$(corestat "$PROXY_CPU"); l1=$(corestat "$LOAD_CPU")
	u1=$(cputicks "$UPSTREAM_PID"); k1=$(childticks); m1=$(proctime)
	[[ $variant == sluice-redis ]] && r1=$(cputicks "$REDIS_PID")
	local evalsha="0 0"
	# The scripts' calls (FCALL of the capacity functions, EVALSHA of the
	# others) and their mean time.
	[[ $variant == sluice-redis ]] && evalsha=$(redis-cli -p "$REDIS_PORT" info commandstats | awk -F'[:,=]' '
		$1 == "cmdstat_evalsha" || $1 == "cmdstat_fcall" { n += $3; us += $5 }
		END { printf "%d %.2f\n", n, n ? us / n : 0 }') # calls usec_per_call
	rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$PROXY_PID/status")
	requests=$(awk '/requests in/ { print $1 }' "$out")
	rps=$(awk '/^Requests\/sec/ { print $2 }' "$out")
	p50=$(wrk_ms "$(awk '$1 == "50%" { print $2 }' "$out")")
	p99=$(wrk_ms "$(awk '$1 == "99%" { print $2 }' "$out")")
	non2xx=$(awk '/Non-2xx/ { print $NF }' "$out")
	non2xx=${non2xx:-0}
	if grep -q 'Socket errors' "$out"; then grep 'Socket errors' "$out" >&2; fi
	cpu_us=$(awk -v a="$t0" -v b="$t1" -v hz="$CLK_TCK" -v n="$requests" 'BEGIN { printf "%.1f", (b - a) / hz * 1e6 / n }')
	evalsha_req=$(awk -v e="$evalsha" -v n="$requests" 'BEGIN { split(e, x, " "); printf "%.2f", x[1] / n }')
	script_us=$(awk -v e="$evalsha" 'BEGIN { split(e, x, " "); printf "%.2f", x[2] }')
	redis_us=$(awk -v a="$r0" -v b="$r1" -v hz="$CLK_TCK" -v n="$requests" 'BEGIN { printf "%.1f", (b - a) / hz * 1e6 / n }')
	core0=$(pct "$c0" "$c1")
	core1=$(pct "$l0" "$l1")
	# The proxy's share of its core; the rest of the busy time there is the
	# kernel's loopback work (softirq) and whatever else runs on the machine.
	proxy_pct=$(pct "$(awk -v t="$t0" -v c="$c0" 'BEGIN { split(c, x, " "); print t, x[2] }')" \
		"$(awk -v t="$t1" -v c="$c1" 'BEGIN { split(c, x, " "); print t, x[2] }')")
	foreign=$(others "$m0" "$m1" $((t1 - t0 + u1 - u0 + k1 - k0 + r1 - r0)))
	echo "   $rps req/s, p50 ${p50}ms p99 ${p99}ms, ${cpu_us}µs CPU/req, RSS $((rss / 1024))MiB," \
		"core$PROXY_CPU ${core0}% busy (proxy ${proxy_pct}%), core$LOAD_CPU ${core1}%, others ${foreign}% of a core, non-2xx $non2xx"
	[[ $variant == sluice-redis ]] && echo "   redis: $evalsha_req FCALL+EVALSHA/req at ${script_us}µs each," \
		"redis-server CPU ${redis_us}µs/req"

	if [[ $STREAM == 1 ]]; then
		ttfb= foreign_s=0 # streams were the load: no separate streaming run
		return 0
	fi
	t0=$(cputicks "$PROXY_PID"); u0=$(cputicks "$UPSTREAM_PID"); k0=$(childticks); m0=$(proctime)
	ttfb=$(timeout $((TTFB_S + 45)) taskset -c "$LOAD_CPU" "$WORK/ttfb" --url "$url" --key "$BENCH_KEY" \
		--concurrency "$TTFB_CONC" --duration "$TTFB_DURATION" --max-tokens "$TTFB_TOKENS" --chunk-delay "$CHUNK_DELAY") ||
		echo "   ttfb reported errors" >&2
	t1=$(cputicks "$PROXY_PID"); u1=$(cputicks "$UPSTREAM_PID"); k1=$(childticks); m1=$(proctime)
	foreign_s=$(others "$m0" "$m1" $((t1 - t0 + u1 - u0 + k1 - k0)))
	echo "   streaming: $ttfb others=${foreign_s}%"
}

# run_variant starts one proxy, measures it (again, up to $RETRIES times,
# when other processes used more than $NOISY% of a core meanwhile), records
# the figures and stops it.
run_variant() {
	local variant=$1 round=$2 url attempt
	local rss rps p50 p99 non2xx cpu_us core0 core1 proxy_pct foreign ttfb foreign_s evalsha_req script_us redis_us
	echo "== round $round: $variant"
	start_proxy "$variant" "$round"
	url="http://$PROXY_ADDR/v1/chat/completions"
	# One request first: a misconfigured proxy fails here, loudly.
	curl -fsS -o /dev/null -H "Authorization: Bearer $BENCH_KEY" -H 'Content-Type: application/json' \
		-d '{"model":"bench","messages":[{"role":"user","content":"hi"}]}' --max-time 5 "$url" ||
		die "$variant does not answer $url"
	for ((attempt = 0; attempt <= RETRIES; attempt++)); do
		wait_quiet
		measure "$variant" "$round" "$url"
		((foreign <= NOISY && foreign_s <= NOISY)) && break
		((attempt < RETRIES)) && echo "   disturbed by other processes; measuring again"
	done
	kv() { sed -nE "s/.*(^| )$1=([0-9]+).*/\2/p" <<<"$ttfb"; }
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$variant" "$round" "$rps" "$p50" "$p99" \
		"$cpu_us" "$rss" "$core0" "$core1" "$(kv ttfb_p50_us)" "$(kv ttfb_p99_us)" "$(kv merged)" "$(kv streams)" \
		"$(kv errors)" "$non2xx" "$(kv incomplete)" "$proxy_pct" "$foreign" "$foreign_s" "$evalsha_req" "$script_us" "$redis_us" >>"$RESULTS"
	stop "$PROXY_PID"
}

# window loads the gateways of the indexes given, all at once, for one
# window (w) and records each one's CPU ticks and requests.
window() {
	local i
	local -A t0
	local -a loads
	for i; do
		alive "${pids[i]}" "${names[i]}" "$WORK/${ORDER[i]}-paired$i.err"
		t0[$i]=$(cputicks "${pids[i]}")
	done
	for i; do
		timeout $((DUR_S + 30)) taskset -c "$LOAD_CPU" wrk -t2 -c"$CONNS" -d"$DURATION" -s "$ROOT/bench/$LOAD" "${urls[i]}" >"$WORK/wrk-$i-w$w.txt" &
		loads+=($!)
	done
	wait "${loads[@]}"
	sleep 0.5
	for i; do
		printf '%s\t%s\t%s\t%s\n' "${names[i]}" "$w" "$(($(cputicks "${pids[i]}") - t0[$i]))" \
			"$(awk '/requests in/ { print $1 }' "$WORK/wrk-$i-w$w.txt")" >>"$RESULTS"
	done
}

# paired runs the PAIRED mode (see the header) and prints its results.
paired() {
	local -a pids urls names
	local i w v
	# A variant given twice runs as two gateways, named v#0 and v#1: the
	# same gateway against itself shows what the method cannot tell apart.
	for i in "${!ORDER[@]}"; do
		v=${ORDER[i]}
		start_proxy "$v" "paired$i"
		pids+=("$PROXY_PID")
		urls+=("http://$PROXY_ADDR/v1/chat/completions")
		(($(printf '%s\n' "${ORDER[@]}" | grep -cx -- "$v") > 1)) && v="$v#$i"
		names+=("$v")
	done
	for i in "${!ORDER[@]}"; do
		timeout $(($(seconds "$WARMUP") + 30)) taskset -c "$LOAD_CPU" wrk -t2 -c"$CONNS" -d"$WARMUP" -s "$ROOT/bench/$LOAD" "${urls[i]}" >/dev/null
	done
	wait_quiet
	echo "== $PAIRED windows of $DURATION per variant, $( ((TOGETHER)) && echo "all loaded at once" || echo "side by side")"
	for ((w = 1; w <= PAIRED; w++)); do
		local -a turn=("${!ORDER[@]}")
		((w % 2 == 0)) && turn=($(printf '%s\n' "${turn[@]}" | tac))
		if ((TOGETHER)); then
			window "${turn[@]}"
		else
			for i in "${turn[@]}"; do window "$i"; done
		fi
		awk -F'\t' -v w="$w" -v hz="$CLK_TCK" '$2 == w { printf "%s %s %.1f µs/req;", (n++ ? "" : "  "), $1, $3 / hz * 1e6 / $4 }
			END { print "" }' "$RESULTS"
	done
	echo
	echo "CPU per request over all windows (sum of ticks / sum of requests), and against the first variant:"
	echo
	awk -F'\t' -v hz="$CLK_TCK" -v first="${names[0]}" '
		{ t[$1] += $3; n[$1] += $4; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
		END {
			print "| variant | windows | requests | CPU µs/req | ratio |"
			print "| --- | ---: | ---: | ---: | ---: |"
			for (i = 1; i <= k; i++) {
				v = order[i]
				printf "| %s | %d | %d | %.1f | %.3f |\n", v, NR / k, n[v], t[v] / hz * 1e6 / n[v], (t[v] / n[v]) / (t[first] / n[first])
			}
			if (("sluice-billed" in n) && ("sluice-info" in n)) {
				r = (t["sluice-billed"] / n["sluice-billed"]) / (t["sluice-info"] / n["sluice-info"])
				printf "\nBilling: sluice-billed / sluice-info CPU/req %.3f (target <= 1.05: %s)\n", r, r <= 1.05 ? "PASS" : "FAIL"
			}
		}' "$RESULTS"
}

read -r -a ORDER <<<"$VARIANTS"
if ((PAIRED > 0)); then
	[[ $STREAM == 0 ]] || die "PAIRED runs whole answers only (STREAM=0)"
	paired
	exit 0
fi
for ((round = 1; round <= ROUNDS; round++)); do
	if ((round % 2 == 1)); then
		for v in "${ORDER[@]}"; do run_variant "$v" "$round"; done
	else
		for ((i = ${#ORDER[@]} - 1; i >= 0; i--)); do run_variant "${ORDER[i]}" "$round"; done
	fi
done

echo
if [[ $STREAM == 1 ]]; then
	echo "== results: wrk -t2 -c$CONNS -d$DURATION -s stream.lua (streams of $STREAM_TOKENS words, chunk delay $CHUNK_DELAY);"
	echo "   proxies on core $PROXY_CPU, upstream+load on core $LOAD_CPU; $ROUNDS round(s)"
	echo
	echo "Per round (streams/s and latencies are of whole streams):"
	echo
	awk -F'\t' 'BEGIN {
		print "| variant | round | streams/s | p50 ms | p99 ms | CPU µs/stream | RSS MiB | proxy core busy (proxy itself) | load core busy | other processes | errors |"
		print "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |" }
		{ printf "| %s | %s | %.0f | %.2f | %.2f | %.1f | %.1f | %s%% (%s%%) | %s%% | %s%% | %d |\n",
			$1, $2, $3, $4, $5, $6, $7 / 1024, $8, $17, $9, $18, $15 }' "$RESULTS"
	echo
	echo "Mean over rounds, and ratios to bare (target: CPU/stream <= 1.15; streams/s is set by the connections and the chunk delay, so ~1):"
	echo
	awk -F'\t' '
		{ n[$1]++; rps[$1] += $3; p50[$1] += $4; p99[$1] += $5; cpu[$1] += $6; rss[$1] += $7; errs[$1] += $15
		  if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
		END {
			print "| variant | streams/s | p50 ms | p99 ms | CPU µs/stream | RSS MiB | streams/s ratio | CPU/stream ratio | verdict |"
			print "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
			b = "bare"
			for (i = 1; i <= k; i++) {
				v = order[i]; c = n[v]
				line = sprintf("| %s | %.0f | %.2f | %.2f | %.1f | %.1f", v, rps[v] / c, p50[v] / c, p99[v] / c, cpu[v] / c, rss[v] / c / 1024)
				if (v == b || !(b in n)) { print line " | 1 | 1 | baseline |"; continue }
				tr = (rps[v] / c) / (rps[b] / n[b]); cr = (cpu[v] / c) / (cpu[b] / n[b])
				printf "%s | %.2f | %.2f %s | %s |\n", line, tr, cr, cr <= 1.15 ? "PASS" : "FAIL", (cr <= 1.15 && errs[v] == 0) ? "PASS" : "FAIL"
			}
		}' "$RESULTS"
	echo
else
	echo "== results: wrk -t2 -c$CONNS -d$DURATION (non-streaming), ttfb -concurrency $TTFB_CONC -duration $TTFB_DURATION"
	echo "   (chunk delay $CHUNK_DELAY, $TTFB_TOKENS tokens); proxies on core $PROXY_CPU, upstream+load on core $LOAD_CPU; $ROUNDS round(s)"
	echo
	echo "Per round:"
	echo
	awk -F'\t' 'BEGIN {
		print "| variant | round | req/s | p50 ms | p99 ms | CPU µs/req | RSS MiB | proxy core busy (proxy itself) | load core busy | other processes (wrk / streams) | TTFB p50 µs | TTFB p99 µs | streams | merged | errors |"
		print "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" }
		{ printf "| %s | %s | %.0f | %.2f | %.2f | %.1f | %.1f | %s%% (%s%%) | %s%% | %s%% / %s%% | %s | %s | %s | %s | %d |\n",
			$1, $2, $3, $4, $5, $6, $7 / 1024, $8, $17, $9, $18, $19, $10, $11, $13, $12, $14 + $15 + $16 }' "$RESULTS"
	echo
	echo "Mean over rounds, and ratios to bare (targets: throughput >= 0.75, CPU/req <= 1.35, TTFB p50 <= 1.2, merged = 0):"
	echo
	awk -F'\t' '
		{ n[$1]++; rps[$1] += $3; p50[$1] += $4; p99[$1] += $5; cpu[$1] += $6; rss[$1] += $7
		  t50[$1] += $10; t99[$1] += $11; merged[$1] += $12; errs[$1] += $14 + $15 + $16
		  if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
		function pf(ok) { return ok ? "PASS" : "FAIL" }
		END {
			print "| variant | req/s | p50 ms | p99 ms | CPU µs/req | RSS MiB | TTFB p50 µs | TTFB p99 µs | merged | throughput ratio | CPU/req ratio | TTFB p50 ratio | TTFB p99 ratio | verdict |"
			print "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
			b = "bare"
			for (i = 1; i <= k; i++) {
				v = order[i]; c = n[v]
				line = sprintf("| %s | %.0f | %.2f | %.2f | %.1f | %.1f | %.0f | %.0f | %d", v, rps[v] / c, p50[v] / c, p99[v] / c,
					cpu[v] / c, rss[v] / c / 1024, t50[v] / c, t99[v] / c, merged[v])
				if (v == b || !(b in n)) { print line " | 1 | 1 | 1 | 1 | baseline |"; continue }
				tr = (rps[v] / c) / (rps[b] / n[b]); cr = (cpu[v] / c) / (cpu[b] / n[b])
				fr = (t50[v] / c) / (t50[b] / n[b]); f99 = (t99[v] / c) / (t99[b] / n[b])
				printf "%s | %.2f %s | %.2f %s | %.2f %s | %.2f | %s |\n", line, tr, pf(tr >= 0.75), cr, pf(cr <= 1.35),
					fr, pf(fr <= 1.2), f99, (tr >= 0.75 && cr <= 1.35 && fr <= 1.2 && merged[v] == 0 && errs[v] == 0) ? "PASS" : "FAIL"
			}
		}' "$RESULTS"
fi
if grep -q '^sluice-redis' "$RESULTS"; then
	echo
	echo "Redis (sluice-redis; targets: Redis script time <= 20 µs/req, CPU/req <= 1.3x sluice-info's, throughput >= 0.6x bare's):"
	echo
	awk -F'\t' '
		{ n[$1]++; rps[$1] += $3; cpu[$1] += $6 }
		$1 == "sluice-redis" { ev += $20; us += $21; req += $20 * $21; rc += $22 }
		function pf(ok) { return ok ? "PASS" : "FAIL" }
		END {
			v = "sluice-redis"; c = n[v]
			print "| FCALL+EVALSHA/req | script µs/call | script µs/req | redis-server CPU µs/req | CPU/req vs sluice-info | req/s vs sluice-info | req/s vs bare |"
			print "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
			line = sprintf("| %.2f | %.2f | %.1f %s | %.1f", ev / c, us / c, req / c, pf(req / c <= 20), rc / c)
			i = "sluice-info"; b = "bare"
			line = line ((i in n) ? sprintf(" | %.2f %s | %.2f", (cpu[v] / c) / (cpu[i] / n[i]), pf((cpu[v] / c) / (cpu[i] / n[i]) <= 1.3),
				(rps[v] / c) / (rps[i] / n[i])) : " | - | -")
			line = line ((b in n) ? sprintf(" | %.2f %s |", (rps[v] / c) / (rps[b] / n[b]), pf((rps[v] / c) / (rps[b] / n[b]) >= 0.6)) : " | - |")
			print line
		}' "$RESULTS"
	echo
fi
if grep -q '^sluice-billed' "$RESULTS" && grep -q '^sluice-info' "$RESULTS"; then
	echo
	echo "Billing (sluice-billed against sluice-info; target: CPU/req <= 1.05x):"
	echo
	awk -F'\t' '
		{ n[$1]++; rps[$1] += $3; cpu[$1] += $6 }
		END {
			v = "sluice-billed"; i = "sluice-info"; r = (cpu[v] / n[v]) / (cpu[i] / n[i])
			print "| CPU µs/req billed | CPU µs/req unbilled | CPU/req ratio | req/s ratio |"
			print "| ---: | ---: | ---: | ---: |"
			printf "| %.1f | %.1f | %.3f %s | %.2f |\n", cpu[v] / n[v], cpu[i] / n[i], r, r <= 1.05 ? "PASS" : "FAIL", (rps[v] / n[v]) / (rps[i] / n[i])
		}' "$RESULTS"
	echo
fi
echo
# Sluice's warnings, counted by message and class (wrk leaves with requests in
# flight at the end of each run: a few caller_gone are expected).
cat "$WORK"/sluice-warn-*.err 2>/dev/null | sed -nE 's/.*"msg":"([^"]*)".*"class":"([^"]*)".*/\1 (\2)/p; t; s/.*"msg":"([^"]*)".*/\1/p' |
	sort | uniq -c | sed 's/^/   warnings logged by Sluice at --log-level warn: /' || true
exit 0
