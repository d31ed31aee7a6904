#!/usr/bin/env python3
"""Derive the edited sample pairs from the real captures (see README.md).
Run from this directory: python3 derive.py"""
import os, re, shutil

def copy(src, dst):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)

def edit(path, fn):
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(fn(text))

def set_irq(text, label, col, value):
    """Set the count in CPU column col of row label, keeping the layout."""
    out = []
    for line in text.split("\n"):
        if line.split(":")[0].strip() == label:
            head, rest = line.split(":", 1)
            m = list(re.finditer(r"\d+", rest))
            g = m[col]
            rest = rest[:g.start()] + str(value).rjust(g.end() - g.start()) + rest[g.end():]
            line = head + ":" + rest
        out.append(line)
    return "\n".join(out)

def set_softnet(text, row, col, value):
    lines = text.split("\n")
    f = lines[row].split(" ")
    f[col] = "%08x" % value
    lines[row] = " ".join(f)
    return "\n".join(lines)

W = 1 << 32

# counter-wrap: udp-loopback with 32-bit counters moved just below 2^32 in a
# and past it in b, keeping every real difference.
copy("udp-loopback", "counter-wrap")
sn_a = int(open("udp-loopback/a/proc/net/softnet_stat").read().split("\n")[0].split()[0], 16)
sn_b = int(open("udp-loopback/b/proc/net/softnet_stat").read().split("\n")[0].split()[0], 16)
base = W - 0x10000
edit("counter-wrap/a/proc/net/softnet_stat", lambda t: set_softnet(t, 0, 0, base))
edit("counter-wrap/b/proc/net/softnet_stat", lambda t: set_softnet(t, 0, 0, (base + sn_b - sn_a) % W))
res = lambda d: int(re.search(r"RES:\s+(\d+)", open(d + "/proc/interrupts").read()).group(1))
ra, rb = res("udp-loopback/a"), res("udp-loopback/b")
edit("counter-wrap/a/proc/interrupts", lambda t: set_irq(t, "RES", 0, W - 296))
edit("counter-wrap/b/proc/interrupts", lambda t: set_irq(t, "RES", 0, (W - 296 + rb - ra) % W))

# counter-reset: disk-io where IRQ 36 (virtio-blk) was re-created between
# the samples (count on CPU1 restarts at 120) and BLOCK softirqs on CPU1 reset.
copy("disk-io", "counter-reset")
edit("counter-reset/b/proc/interrupts", lambda t: set_irq(t, "36", 1, 120))
edit("counter-reset/b/proc/softirqs", lambda t: set_irq(t, "BLOCK", 1, 7))

# cpu-offline: stress-cpu where CPU1 went offline before b. The kernel then
# drops cpu1 from /proc/stat, the CPU1 column from /proc/interrupts and the
# CPU1 row from softnet_stat; /proc/softirqs keeps all possible CPUs.
copy("stress-cpu", "cpu-offline")
edit("cpu-offline/b/proc/stat", lambda t: "\n".join(l for l in t.split("\n") if not l.startswith("cpu1 ")))
def drop_col1(t):
    lines = t.split("\n")
    out = [re.sub(r"\s+CPU1\b", "", lines[0])]
    for l in lines[1:]:
        if ":" not in l:
            out.append(l); continue
        head, rest = l.split(":", 1)
        m = list(re.finditer(r"\d+", rest))
        if len(m) >= 2 and head.strip() not in ("ERR", "MIS"):
            g = m[1]
            rest = rest[:m[0].end()] + rest[g.end():]
        out.append(head + ":" + rest)
    return "\n".join(out)
edit("cpu-offline/b/proc/interrupts", drop_col1)
edit("cpu-offline/b/proc/net/softnet_stat", lambda t: "\n".join(t.split("\n")[:1] + t.split("\n")[2:]))

# memcached-one-cpu-idle: memcached-saturated where CPU1 was idle over the
# interval: in b, CPU1's ticks of the interval are all idle (the total kept)
# and memcaslap's thread that last ran there used no CPU. CPU0 (memcached's
# workers, a memcaslap thread and the receive softirqs) is as captured.
copy("memcached-saturated", "memcached-one-cpu-idle")
def cpu1_idle(a, b):
    fa = a.split("\n")
    out = []
    for line in b.split("\n"):
        if line.startswith("cpu1 "):
            va = [int(x) for x in next(l for l in fa if l.startswith("cpu1 ")).split()[1:]]
            vb = [int(x) for x in line.split()[1:]]
            total = sum(vb[:8]) - sum(va[:8])  # user…steal; guest is inside user
            vb = va[:]
            vb[3] += total
            line = "cpu1 " + " ".join(str(x) for x in vb)
        out.append(line)
    return "\n".join(out)
sa = open("memcached-saturated/a/proc/stat").read()
edit("memcached-one-cpu-idle/b/proc/stat", lambda t: cpu1_idle(sa, t))
def no_use(a):
    def fn(t):
        fa, fb = a.split(), t.split()
        fb[13], fb[14] = fa[13], fa[14]  # utime, stime (fields 14, 15)
        return " ".join(fb) + "\n"
    return fn
for tid in os.listdir("memcached-saturated/b/proc/25560/task"):
    st = "proc/25560/task/%s/stat" % tid
    if open("memcached-saturated/b/" + st).read().split()[38] == "1":
        edit("memcached-one-cpu-idle/b/" + st, no_use(open("memcached-saturated/a/" + st).read()))
