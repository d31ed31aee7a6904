#!/usr/bin/env bash
# The runs behind docs/benchmarks.md's "auto from evidence" section (the
# campaign of record). Per scenario:
#   1. tune --search exhaustive: every distinct placement, to find the best
#      one this machine has (ranked by median; EXH_ROUNDS runs each);
#   2. tune --auto: what the successive-halving search keeps;
#   3. one bench, interleaved, ROUNDS rounds (10: with the ten
#      configurations of the five scenarios, one full Williams square, so every
#      configuration runs once in every position and once after every
#      other; with 5 rounds the A/A intervals were twice as wide), after
#      one priming run, each run after a warm-up: an
#      A/A pair (default vs default#aa: the noise floor), irqbalance, every
#      policy, auto (deciding from the latest default run's measured load),
#      the exhaustive best (#best) and tune's choice (#tune) — so every ratio
#      the docs state comes from this one run, side by side.
# Root, a quiet machine (nothing else running); about 65 minutes for the
# five scenarios of the campaign with the defaults below (the NAPI benches: 15
# more; SCENARIOS="udp memcached nginx storage storage-psync" leaves them out). Results in
# $OUT (JSON and text).
#
# The workloads campaign (make bench-evidence-workloads: SCENARIOS="mysql
# mysql-sweep sockperf sockperf-pp", about 100 minutes): the database scenario (MariaDB
# point selects) searched and benched as above; its curve against
# concurrency (SWEEP) with default, irqbalance, dedicated-core, rps-spread
# and auto, an A/A twin at every value; sockperf under load (RATE messages
# per second, GRO on so UDP takes the veth's NAPI path, the client on CPU 0) searched on its p99
# with the NAPI knobs, then benched; sockperf ping-pong the same way. Every
# run ends with every scenario's A/A width (aa-widths.txt).
#
# SMOKE=1 shrinks every run (2 rounds of 1 s, one exhaustive round, a
# 20 s tune budget, two sweep values): it proves the campaign runs and
# restores the machine, nothing more — its ratios are not evidence.
set -euo pipefail
BIN=${BIN:-bin/irqpilot}
OUT=${OUT:-bench-results}
if [ "${SMOKE:-0}" = 1 ]; then
	: "${ROUNDS:=2}" "${DUR:=1s}" "${EXH_ROUNDS:=1}" "${TUNE_BUDGET:=20s}" "${TUNE_ROUNDS:=2}" "${SWEEP:=1,4}" "${PRIME:=1s}" "${WARMUP:=0s}"
fi
ROUNDS=${ROUNDS:-10}
DUR=${DUR:-3s}
EXH_ROUNDS=${EXH_ROUNDS:-3}
# tune's confirmation rounds (the winner, the baseline and its A/A twin).
TUNE_ROUNDS=${TUNE_ROUNDS:-6}
SWEEP=${SWEEP:-1,4,16,64}
# Rounds per sweep point: 6, the fewest with a verdict (each point is a
# bench of six configurations; 10 rounds would add some 40 minutes).
SWEEP_ROUNDS=${SWEEP_ROUNDS:-$((ROUNDS < 6 ? ROUNDS : 6))}
RATE=${RATE:-10000}
PRIME=${PRIME:-5s}
WARMUP=${WARMUP:-1s}
# The load generators of memcached and nginx stand for remote clients,
# which no server-side plan can place: the scenario fixes them to every
# online CPU (where the scheduler puts an unpinned process), so the searches
# rank only what irqpilot controls — the server's CPUs, RPS, IRQs. The
# paired rerun searched client placement too; its best plans all pinned the load
# generator (docs/benchmarks.md). CLIENT=free searches it again.
ONLINE=$(cat /sys/devices/system/cpu/online)
if [ "${CLIENT:-fixed}" = free ]; then NETCLIENT=(); else NETCLIENT=(--client-cpus "$ONLINE"); fi
TUNE_BUDGET=${TUNE_BUDGET:-2m}
CONFIGS=default,default#aa,irqbalance,dedicated-core,per-queue,colocate,rps-spread,auto
mkdir -p "$OUT"

# run COMMAND…: under flock "$LOCK" when LOCK names a lock file, so that a
# shared machine's other measurements wait for each command (and it for
# them) without one lock held for the whole campaign.
run() {
	if [ -n "${LOCK:-}" ]; then
		flock "$LOCK" "$@"
	else
		"$@"
	fi
}

# field FILE KEY: a top-level string or the first element of a list in tune's JSON.
field() {
	python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(v[0] if isinstance(v,list) else v)' "$1" "$2"
}

scenario() { # name, then workload flags
	local name=$1
	shift
	# REUSE=1 keeps a search already in $OUT (a bench rerun after a harness
	# change that does not touch the search).
	if [ "${REUSE:-0}" = 1 ] && [ -s "$OUT/$name-exhaustive.json" ] && [ -s "$OUT/$name-tune.json" ]; then
		echo "== $name: searches kept from $OUT"
	else
		echo "== $name: exhaustive search"
		run "$BIN" tune --search exhaustive --rounds "$EXH_ROUNDS" --duration "$DUR" --prime "$PRIME" "$@" -o "$OUT/$name-exhaustive.json" >"$OUT/$name-exhaustive.txt"
		echo "== $name: tune --auto"
		run "$BIN" tune --auto --budget "$TUNE_BUDGET" --rounds "$TUNE_ROUNDS" --duration "$DUR" --prime "$PRIME" "$@" -o "$OUT/$name-tune.json" >"$OUT/$name-tune.txt"
	fi
	local best
	best=$(field "$OUT/$name-exhaustive.json" ranked)
	local tuned # what tune keeps: its best only when that beat the baseline beyond the noise
	tuned=$(field "$OUT/$name-tune.json" best)
	if [ "$(field "$OUT/$name-tune.json" kept)" != True ]; then
		tuned=$(field "$OUT/$name-tune.json" baseline)
	fi
	echo "== $name: bench (exhaustive best: $best; tune kept: $tuned)"
	run "$BIN" bench --rounds "$ROUNDS" --duration "$DUR" --warmup "$WARMUP" --prime "$PRIME" --configs "$CONFIGS,$best#best,$tuned#tune" "$@" \
		-o "$OUT/$name.json" --chart "$OUT/$name.png" >"$OUT/$name.txt"
	cat "$OUT/$name.txt"
}

# NAPI knobs (the kernel's NAPI documentation): one interleaved bench each, no search.
napi() { # name, then bench flags
	local name=$1
	shift
	echo "== $name: bench"
	run "$BIN" bench --rounds "$ROUNDS" --duration "$DUR" --warmup "$WARMUP" --prime "$PRIME" "$@" -o "$OUT/$name.json" >"$OUT/$name.txt"
	cat "$OUT/$name.txt"
}

# The database curve: one bench per concurrency, an A/A twin at each.
sweep() { # name, then bench flags
	local name=$1
	shift
	echo "== $name: sweep connections=$SWEEP"
	run "$BIN" bench --rounds "$SWEEP_ROUNDS" --duration "$DUR" --warmup "$WARMUP" --prime "$PRIME" --sweep "connections=$SWEEP" \
		--configs default,default#aa,irqbalance,dedicated-core,rps-spread,auto "$@" \
		-o "$OUT/$name.json" --chart "$OUT/$name.png" >"$OUT/$name.txt"
	tail -n 8 "$OUT/$name.txt"
}

# Every A/A width of the reports in $OUT: a twin's ratio interval's widest
# multiplicative distance from 1, max(1/low, high) − 1 (the tables' noise
# floor), flagged above ±5 %. A report is
# read again with this version's statistics first (bench --from), so a kept
# older one is judged like a new one; a sweep is always new.
aa_widths() {
	local again="$OUT/.aa"
	mkdir -p "$again"
	local f files=()
	for f in "$OUT"/*.json; do
		case $f in *-exhaustive.json | *-tune.json) continue ;; esac
		if grep -q '"points"' "$f"; then
			files+=("$f")
		elif "$BIN" bench --from "$f" -o "$again/$(basename "$f")" >/dev/null; then
			files+=("$again/$(basename "$f")")
		fi
	done
	[ ${#files[@]} -gt 0 ] || return 0
	python3 - "${files[@]}" <<'PY' | tee "$OUT/aa-widths.txt"
import json, os, sys
def twin(name, rep):
    base = rep.get("baseline") or rep["summary"][0]["config"]
    # Every other copy of the baseline is a twin: default#aa, and
    # default#best or default#tune where the search or tune kept the
    # baseline (bench's noise-floor line takes the widest of them too).
    twins = [s for s in rep.get("summary", []) if s["config"] != base and s["config"].split("#")[0] == base.split("#")[0]]
    if not twins:
        print(f"{name}: no A/A twin of {base}")
    for s in twins:
        r = s.get("ratio") or {}
        if s.get("verdict") == "indicative" or r.get("low") is None or r.get("high") is None:
            print(f"{name}: {s['config']} {r.get('point') or float('nan'):.3f}, indicative (fewer than 6 rounds): no width")
            continue
        # The multiplicative band of bench's noise-floor line (NoiseBand):
        # ratios from 1/F to F are inside the noise.
        f = max(r["high"], 1 / r["low"] if r["low"] > 0 else float("inf"), 1)
        w = f - 1
        flag = "  ABOVE ±5 %" if w > 0.05 else ""
        print(f"{name}: {s['config']} {r['point']:.3f} ({r['low']:.3f}–{r['high']:.3f}): ±{100*w:.1f} %{flag}")
for f in sys.argv[1:]:
    name = os.path.basename(f)[:-5]
    d = json.load(open(f))
    if "points" in d:
        for p in d["points"]:
            twin(f"{name} {d['param']}={p['value']}", p["report"])
    else:
        twin(name, d)
PY
}

for s in ${SCENARIOS:-udp memcached nginx storage storage-psync napi-udp napi-threaded napi-memcached}; do
	case $s in
	udp) scenario udp --workload udp --queues 1 --client-cpus 0 --app-cpus 1 ;;
	memcached) scenario memcached --workload memcached --queues 2 ${NETCLIENT[@]+"${NETCLIENT[@]}"} ;;
	nginx) scenario nginx --workload nginx --queues 2 ${NETCLIENT[@]+"${NETCLIENT[@]}"} ;;
	storage) scenario storage-libaio-qd16 --workload storage --ioengine libaio --iodepth 16 ;;
	storage-psync) scenario storage-psync-qd1 --workload storage --ioengine psync ;;
	napi-udp) napi napi-udp --workload udp --queues 1 --gro --client-cpus 0 --app-cpus 1 \
		--configs default,default#aa,efficiency,latency,default/busypoll=50,latency/epollbusy=50,auto ;;
	napi-threaded) napi napi-threaded --workload udp --queues 1 --threaded-napi --client-cpus 0 --app-cpus 1 \
		--configs default,default#aa,spec:napi=0,spec:napi=1,auto ;;
	napi-memcached) napi napi-memcached --workload memcached --queues 2 --gro --configs default,default#aa,efficiency,latency ;;
	# sysbench stands for remote clients, like memcaslap: placed on every
	# online CPU, never searched.
	mysql) scenario mysql --workload mysql --connections "${CONNECTIONS:-16}" ${NETCLIENT[@]+"${NETCLIENT[@]}"} ;;
	mysql-sweep) sweep mysql-connections --workload mysql ${NETCLIENT[@]+"${NETCLIENT[@]}"} ;;
	# sockperf's under-load client paces its sends by spinning (half of
	# this machine's two CPUs): free, it and the server meet on one CPU in
	# some runs and not in others, and default's p99 ranged 62–1 270 µs
	# over ten quiet runs. Fixed to CPU 0 (SOCKPERF_CLIENT), as the udp
	# flood's sender is, the search places the server around it.
	sockperf) scenario sockperf --workload sockperf --sockperf-mode under-load --rate "$RATE" --gro --client-cpus "${SOCKPERF_CLIENT:-0}" ;;
	# Ping-pong: one message in flight and a client that waits instead of
	# spinning, so every round trip is an observation (some 50 000 in
	# 3 s) and copies of default land within ±10–29 % of each other
	# here, where under load they spread ±202–359 %: the latency
	# scenario this machine can resolve. The client stands for a remote
	# one, on every online CPU.
	sockperf-pp) scenario sockperf-pingpong --workload sockperf --sockperf-mode ping-pong --gro ${NETCLIENT[@]+"${NETCLIENT[@]}"} ;;
	aa) ;; # measure nothing: only the A/A widths of the reports already in $OUT
	*) echo "unknown scenario $s" >&2; exit 2 ;;
	esac
done
aa_widths
