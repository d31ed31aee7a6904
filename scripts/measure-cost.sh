#!/usr/bin/env bash
# Measurements behind docs/interrupt-cost.md: agreement of irqpilot's eBPF
# collector with bpftrace, /proc/stat's tick-sampled softirq share vs the
# measured one, and the collector's overhead on a UDP flood. Root; about
# 1.5 minutes. Traffic stays in two network namespaces created and deleted
# here; fio writes one file below $DIR on the real disk.
#   usage: scripts/measure-cost.sh [bin/irqpilot] [window seconds] [overhead rounds]
set -euo pipefail
BIN=$(readlink -f "${1:-bin/irqpilot}")
WIN=${2:-5}
ROUNDS=${3:-5}
DIR=${DIR:-/var/tmp}
OUT=$(mktemp -d)
SRV=irqp-mc-srv-$$ CLI=irqp-mc-cli-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$SRV" 2>/dev/null || true
  ip netns del "$CLI" 2>/dev/null || true
  rm -f "$DIR/irqp-mc-fio"
}
trap cleanup EXIT
ip netns add "$SRV"; ip netns add "$CLI"
ip -n "$CLI" link add mc0 type veth peer name mc1 netns "$SRV"
ip -n "$CLI" addr add 10.251.78.1/30 dev mc0; ip -n "$CLI" link set mc0 up; ip -n "$CLI" link set lo up
ip -n "$SRV" addr add 10.251.78.2/30 dev mc1; ip -n "$SRV" link set mc1 up; ip -n "$SRV" link set lo up
# seed 004's shape: the sender on CPU0 (veth receives on the sending CPU), the sink on CPU1.
ip netns exec "$SRV" taskset -c 1 env IRQPILOT_BENCH_HELPER=udp-sink "$BIN" -addr 10.251.78.2 -threads 1 &
pids+=($!)
sleep 0.5
send() { ip netns exec "$CLI" taskset -c 0 env IRQPILOT_BENCH_HELPER=udp-send "$BIN" -addr 10.251.78.2 -d "$1"; }

echo "== agreement: udp flood + fio fsync writes, ${WIN}s window, irqpilot record --cost=bpf and bpftrace side by side"
DISKIRQS=$(python3 - "$BIN" <<'PY'
import json, subprocess, sys
inv = json.loads(subprocess.check_output([sys.argv[1], "inventory", "--json"]))
print(" ".join(str(q["irq"]) for q in inv.get("irqs", []) if q.get("class") == "storage"))
PY
)
echo "storage IRQs: $DISKIRQS"
# bpftrace prints its cumulative sums every second with its clock (nsecs is
# CLOCK_MONOTONIC, as the collector's clock_ns), so both tools are compared
# over the same window. Its tracepoint: probes need tracefs; it is mounted
# for the run if absent and unmounted after.
cat > "$OUT/cost.bt" <<'BT'
tracepoint:irq:softirq_entry { @s[cpu, args->vec] = nsecs; }
tracepoint:irq:softirq_exit /@s[cpu, args->vec]/ { @soft[cpu, args->vec] = sum(nsecs - @s[cpu, args->vec]); delete(@s[cpu, args->vec]); }
tracepoint:irq:irq_handler_entry { @h[cpu] = nsecs; @hi[cpu] = args->irq; }
tracepoint:irq:irq_handler_exit /@h[cpu] && @hi[cpu] == args->irq/ { @hard[cpu, args->irq] = sum(nsecs - @h[cpu]); delete(@h[cpu]); }
interval:s:1 { printf("t %llu\n", nsecs); print(@soft); print(@hard); }
END { clear(@s); clear(@h); clear(@hi); clear(@soft); clear(@hard); }
BT
MOUNTED=0
if ! [ -d /sys/kernel/tracing/events ]; then mount -t tracefs nodev /sys/kernel/tracing && MOUNTED=1; fi
bpftrace -f json "$OUT/cost.bt" > "$OUT/bt.json" 2>"$OUT/bt.err" &
btpid=$!
for i in $(seq 100); do grep -q attached_probes "$OUT/bt.json" 2>/dev/null && break; sleep 0.2; done
send $((WIN + 4))s > "$OUT/flood.txt" &
pids+=($!)
fio --name=irqp-mc --filename="$DIR/irqp-mc-fio" --size=16M --rw=randwrite --bs=4k --fsync=1 --ioengine=sync \
    --time_based --runtime=$((WIN + 4)) > "$OUT/fio.txt" &
pids+=($!)
sleep 1
"$BIN" record --cost=bpf --interval 250ms --duration "${WIN}s" -o "$OUT/rec.jsonl" 2>"$OUT/rec.err"
sleep 1.2
kill -INT $btpid; wait $btpid || true
[ "$MOUNTED" = 1 ] && umount /sys/kernel/tracing
wait "${pids[1]}" "${pids[2]}" 2>/dev/null || true
python3 - "$OUT" "$DISKIRQS" <<'PY'
import json, sys
out, disk = sys.argv[1], {int(x) for x in sys.argv[2].split()}
names = ["HI","TIMER","NET_TX","NET_RX","BLOCK","IRQ_POLL","TASKLET","SCHED","HRTIMER","RCU"]
recs = [json.loads(l) for l in open(out + "/rec.jsonl")][1:]
# bpftrace dumps: (t, soft{(cpu,vec)}, hard{(cpu,irq)}) cumulative
dumps, cur = [], None
for l in open(out + "/bt.json"):
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("type") == "printf" and m["data"].startswith("t "):
        cur = [int(m["data"].split()[1]), {}, {}]; dumps.append(cur)
    elif m.get("type") == "map" and cur is not None:
        for k, v in m["data"].items():
            for kk, ns in v.items():
                a, b = (int(p) for p in kk.split(","))
                if k == "@soft": cur[1][(a, names[b])] = ns
                elif k == "@hard": cur[2][(a, b)] = ns
# the bpftrace dumps inside the recording, and the recording's samples nearest to them
t0, t1 = recs[0]["cost"]["clock_ns"], recs[-1]["cost"]["clock_ns"]
inside = [d for d in dumps if t0 <= d[0] <= t1]
d0, d1 = inside[0], inside[-1]
near = lambda t: min(recs, key=lambda r: abs(r["cost"]["clock_ns"] - t))
a, b = near(d0[0])["cost"], near(d1[0])["cost"]
sec, bsec = (b["clock_ns"] - a["clock_ns"]) / 1e9, (d1[0] - d0[0]) / 1e9
ca, cb = {c: i for i, c in enumerate(a["cpus"])}, {c: i for i, c in enumerate(b["cpus"])}
ours_soft, ours_hard = {}, {}
for va, vb in zip(a["softirqs"], b["softirqs"]):
    for cpu, i in cb.items():
        ours_soft[(cpu, names[vb["id"]])] = (vb["time_ns"][i] - va["time_ns"][ca[cpu]]) / 1e9 / sec
pa = {h["id"]: h for h in a.get("hardirqs") or []}
for hb in b.get("hardirqs") or []:
    ha = pa.get(hb["id"], {"time_ns": [0]*len(ca)})
    for cpu, i in cb.items():
        ours_hard[(cpu, hb["id"])] = (hb["time_ns"][i] - ha["time_ns"][ca[cpu]]) / 1e9 / sec
bt_soft = {k: (d1[1].get(k, 0) - d0[1].get(k, 0)) / 1e9 / bsec for k in d1[1]}
bt_hard = {k: (d1[2].get(k, 0) - d0[2].get(k, 0)) / 1e9 / bsec for k in d1[2]}
def row(what, o, t):
    d = (o - t) / t * 100 if t else float("nan")
    print(f"  {what:<22} irqpilot {1000*o:9.3f} ms/s   bpftrace {1000*t:9.3f} ms/s   diff {d:+6.1f} %")
print(f"windows: irqpilot {sec:.2f} s, bpftrace {bsec:.2f} s, starts {(d0[0]-a['clock_ns'])/1e6:+.0f} ms apart")
for cpu in sorted(cb):
    row(f"CPU{cpu} NET_RX", ours_soft.get((cpu, "NET_RX"), 0), bt_soft.get((cpu, "NET_RX"), 0))
    row(f"CPU{cpu} BLOCK", ours_soft.get((cpu, "BLOCK"), 0), bt_soft.get((cpu, "BLOCK"), 0))
for irq in sorted(disk):
    for cpu in sorted(cb):
        o, t = ours_hard.get((cpu, irq), 0), bt_hard.get((cpu, irq), 0)
        if o or t: row(f"CPU{cpu} irq {irq} (disk)", o, t)
print("/proc/stat tick-sampled softirq share vs measured softirq time (irqpilot's whole recording):")
f, l = recs[0], recs[-1]
fs = (l["cost"]["clock_ns"] - f["cost"]["clock_ns"]) / 1e9
st = {c["id"]: c for c in f["cpus"]}
fc = {c: i for i, c in enumerate(f["cost"]["cpus"])}
for c in l["cpus"]:
    tick = (c["softirq"] - st[c["id"]]["softirq"]) / fs * 100
    i = l["cost"]["cpus"].index(c["id"])
    meas = sum(vb["time_ns"][i] - va["time_ns"][fc[c["id"]]] for va, vb in zip(f["cost"]["softirqs"], l["cost"]["softirqs"])) / 1e9 / fs * 100
    print(f"  CPU{c['id']}: /proc/stat softirq {tick:5.1f} %   measured {meas:5.1f} %")
PY
echo "flood: $(cat "$OUT/flood.txt")"

echo "== overhead: udp flood throughput, collector off vs on, interleaved, $ROUNDS rounds of 3 s"
for r in $(seq "$ROUNDS"); do
  off=$(send 3s | sed -E 's/.*: ([0-9.]+) dgram\/s/\1/')
  "$BIN" record --cost=bpf --interval 1s --duration 0 -o /dev/null 2>"$OUT/on-$r.err" &
  rp=$!
  sleep 0.5
  on=$(send 3s | sed -E 's/.*: ([0-9.]+) dgram\/s/\1/')
  kill -INT $rp; wait $rp || true
  echo "  round $r: off $off dgram/s, on $on dgram/s"
  echo "$off $on" >> "$OUT/rounds.txt"
done
python3 - "$OUT/rounds.txt" <<'PY'
import sys, statistics as st
r = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
off, on = [a for a, _ in r], [b for _, b in r]
ratios = [b / a for a, b in r]
print(f"  median off {st.median(off):.0f}, on {st.median(on):.0f} dgram/s; on/off per round {', '.join(f'{x:.3f}' for x in ratios)}; median {st.median(ratios):.3f}")
PY
echo "== collector's own CPU time at --interval 1s (record, 10 s; its line on stderr)"
for mode in bpf counts; do
  "$BIN" record --cost=$mode --interval 1s --duration 10s -o /dev/null 2>&1 | sed "s/^/  --cost=$mode: /"
done
