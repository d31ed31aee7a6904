#!/usr/bin/env bash
# The A/B runs behind docs/benchmarks.md's "auto from evidence" section
# (issue 10): on each scenario, an A/A pair (default vs default#aa: the noise
# floor), irqbalance, every policy and auto, interleaved, each run after a
# warm-up. Root; about 4 minutes per scenario with the defaults below.
set -euo pipefail
BIN=${BIN:-bin/irqpilot}
OUT=${OUT:-bench-results}
ROUNDS=${ROUNDS:-5}
DUR=${DUR:-3s}
CONFIGS=default,default#aa,irqbalance,dedicated-core,per-queue,colocate,rps-spread,auto
mkdir -p "$OUT"
run() { # name, then bench flags
	local name=$1
	shift
	"$BIN" bench --rounds "$ROUNDS" --duration "$DUR" --warmup 1s "$@" -o "$OUT/$name.json" >"$OUT/$name.txt"
	cat "$OUT/$name.txt"
}
for s in ${SCENARIOS:-udp memcached nginx storage storage-psync}; do
	case $s in
	udp) run udp --workload udp --queues 1 --client-cpus 0 --app-cpus 1 --configs "$CONFIGS,spec:app=0,rps=1" ;;
	memcached) run memcached --workload memcached --queues 2 --configs "$CONFIGS" ;;
	nginx) run nginx --workload nginx --queues 2 --configs "$CONFIGS" ;;
	storage) run storage-libaio-qd16 --workload storage --ioengine libaio --iodepth 16 --configs "$CONFIGS,spec:app=0,spec:app=1" ;;
	storage-psync) run storage-psync-qd1 --workload storage --ioengine psync --configs "$CONFIGS,spec:app=0,spec:app=1" ;;
	esac
done
