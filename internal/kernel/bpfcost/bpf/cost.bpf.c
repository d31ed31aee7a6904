// SPDX-License-Identifier: (MIT OR GPL-2.0)
// irqpilot interrupt cost collector: hardirq time and count per IRQ per CPU,
// softirq time and count per vector per CPU, NAPI polls/work/budget
// exhaustion per device queue. All maps are per-CPU (no atomics, no
// contention) and bounded; user space reads and diffs them every interval.
//
// Programs attach as tp_btf (BTF-typed raw tracepoints): no tracefs needed.
//
// Build: `make generate` (bpf2go with Debian's clang; the .o and Go files
// it writes are committed).

// Minimal types, so that no kernel or libc headers are needed.
typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

enum {
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// Kernel types, only the fields read; CO-RE relocates them against the
// running kernel's BTF.
struct net_device {
	char name[16];
} __attribute__((preserve_access_index));

struct napi_struct {
	struct net_device *dev;
	__u32 napi_id;
} __attribute__((preserve_access_index));

#define MAX_IRQS 2048
#define MAX_VECS 16
#define MAX_NAPI 512

// cost is the value of the hardirq and softirq maps.
struct cost {
	__u64 time_ns;
	__u64 count;
};

struct napi_key {
	char dev[16];
	__u32 napi_id;
};

struct napi_val {
	__u64 polls;
	__u64 work;
	__u64 exhausted; // polls that used their whole budget
};

struct hstart {
	__u64 ts;
	__s32 irq;
	__u32 pad;
};

// Start stamps: hardirq handlers do not nest on one CPU, softirqs neither
// (a hardirq can interrupt a softirq: it has its own slot).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hstart);
} hardirq_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_VECS);
	__type(key, __u32);
	__type(value, __u64);
} softirq_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_IRQS);
	__type(key, __u32);
	__type(value, struct cost);
} hardirqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_VECS);
	__type(key, __u32);
	__type(value, struct cost);
} softirqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_NAPI);
	__type(key, struct napi_key);
	__type(value, struct napi_val);
} napi SEC(".maps");

// full counts events lost because a hash map was full: [0] hardirqs, [1] napi.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} full SEC(".maps");

static __always_inline void lost(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&full, &which);
	if (n)
		*n += 1;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(irq_entry, int irq, void *action)
{
	__u32 zero = 0;
	struct hstart *s = bpf_map_lookup_elem(&hardirq_start, &zero);
	if (!s)
		return 0;
	s->ts = bpf_ktime_get_ns();
	s->irq = irq;
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(irq_exit, int irq, void *action, int ret)
{
	__u32 zero = 0;
	struct hstart *s = bpf_map_lookup_elem(&hardirq_start, &zero);
	if (!s || s->ts == 0 || s->irq != irq)
		return 0;
	__u64 dt = bpf_ktime_get_ns() - s->ts;
	s->ts = 0;
	__u32 key = irq;
	struct cost *c = bpf_map_lookup_elem(&hardirqs, &key);
	if (!c) {
		struct cost init = {};
		bpf_map_update_elem(&hardirqs, &key, &init, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&hardirqs, &key);
		if (!c) {
			lost(0);
			return 0;
		}
	}
	c->time_ns += dt;
	c->count += 1;
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(softirq_entry, unsigned int vec)
{
	__u32 key = vec;
	__u64 *ts = bpf_map_lookup_elem(&softirq_start, &key);
	if (ts)
		*ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(softirq_exit, unsigned int vec)
{
	__u32 key = vec;
	__u64 *ts = bpf_map_lookup_elem(&softirq_start, &key);
	if (!ts || *ts == 0)
		return 0;
	__u64 dt = bpf_ktime_get_ns() - *ts;
	*ts = 0;
	struct cost *c = bpf_map_lookup_elem(&softirqs, &key);
	if (!c)
		return 0;
	c->time_ns += dt;
	c->count += 1;
	return 0;
}

SEC("tp_btf/napi_poll")
int BPF_PROG(napi_poll, struct napi_struct *n, int work, int budget)
{
	struct napi_key key = {};
	struct net_device *dev = BPF_CORE_READ(n, dev);
	if (dev)
		bpf_probe_read_kernel_str(key.dev, sizeof(key.dev), &dev->name);
	key.napi_id = BPF_CORE_READ(n, napi_id);
	struct napi_val *v = bpf_map_lookup_elem(&napi, &key);
	if (!v) {
		struct napi_val init = {};
		bpf_map_update_elem(&napi, &key, &init, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&napi, &key);
		if (!v) {
			lost(1);
			return 0;
		}
	}
	v->polls += 1;
	if (work > 0)
		v->work += work;
	if (work >= budget)
		v->exhausted += 1;
	return 0;
}
