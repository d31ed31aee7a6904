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
set -euo pipefail
BIN=${BIN:-bin/irqpilot}
OUT=${OUT:-bench-results}
ROUNDS=${ROUNDS:-10}
DUR=${DUR:-3s}
EXH_ROUNDS=${EXH_ROUNDS:-3}
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
		"$BIN" tune --search exhaustive --rounds "$EXH_ROUNDS" --duration "$DUR" "$@" -o "$OUT/$name-exhaustive.json" >"$OUT/$name-exhaustive.txt"
		echo "== $name: tune --auto"
		"$BIN" tune --auto --budget "$TUNE_BUDGET" --duration "$DUR" "$@" -o "$OUT/$name-tune.json" >"$OUT/$name-tune.txt"
	fi
	local best
	best=$(field "$OUT/$name-exhaustive.json" ranked)
	local tuned # what tune keeps: its best only when that beat the baseline beyond the noise
	tuned=$(field "$OUT/$name-tune.json" best)
	if [ "$(field "$OUT/$name-tune.json" kept)" != True ]; then
		tuned=$(field "$OUT/$name-tune.json" baseline)
	fi
	echo "== $name: bench (exhaustive best: $best; tune kept: $tuned)"
	"$BIN" bench --rounds "$ROUNDS" --duration "$DUR" --warmup 1s --configs "$CONFIGS,$best#best,$tuned#tune" "$@" \
		-o "$OUT/$name.json" --chart "$OUT/$name.png" >"$OUT/$name.txt"
	cat "$OUT/$name.txt"
}

# NAPI knobs (the kernel's NAPI documentation): one interleaved bench each, no search.
napi() { # name, then bench flags
	local name=$1
	shift
	echo "== $name: bench"
	"$BIN" bench --rounds "$ROUNDS" --duration "$DUR" --warmup 1s "$@" -o "$OUT/$name.json" >"$OUT/$name.txt"
	cat "$OUT/$name.txt"
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
	*) echo "unknown scenario $s" >&2; exit 2 ;;
	esac
done
