package lab

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
)

// labKernels are the kernels LAB_KERNELS names (default: DefaultKernel).
func labKernels(t *testing.T) []string {
	vs := strings.Fields(strings.ReplaceAll(os.Getenv("LAB_KERNELS"), ",", " "))
	if len(vs) == 0 {
		vs = []string{DefaultKernel}
	}
	for _, v := range vs {
		if _, ok := Kernels[v]; !ok {
			t.Fatalf("LAB_KERNELS: no lab kernel %q (known: %s)", v, strings.Join(KernelVersions(), ", "))
		}
	}
	return vs
}

// featurePlans ask for one setting each of the small shape's virtio-net,
// by the feature it needs.
var featurePlans = []struct{ feature, yaml string }{
	{"threaded NAPI", "napi:\n  - {device: eth0, threaded: true, reason: lab}\n"},
	{"NAPI IRQ deferral", "napi:\n  - {device: eth0, defer_hard_irqs: 2, reason: lab}\n"},
	{"GRO flush timeout", "napi:\n  - {device: eth0, gro_flush_timeout: 20000, reason: lab}\n"},
	{"RPS", "rx_queues:\n  - {device: eth0, queue: 0, rps_cpus: 1, reason: lab}\n"},
	{"RFS flow tables", "rx_queues:\n  - {device: eth0, queue: 0, rps_flow_cnt: 256, reason: lab}\n"},
	{"XPS", "tx_queues:\n  - {device: eth0, queue: 0, xps_cpus: 1, reason: lab}\n"},
	{"RFS socket flow table", "rps_sock_flow_entries: {value: 4096, reason: lab}\n"},
	{"busy polling of reads", "busy_poll: {busy_read: 50, reason: lab}\n"},
	{"busy polling of poll and epoll", "busy_poll: {busy_poll: 50, reason: lab}\n"},
}

var reFeatureRC = regexp.MustCompile(`@@F (\d+) rc=(\d+)@@`)

// TestLabKernelFeatures boots the small shape on each kernel of
// LAB_KERNELS and, for every feature, asks the guest's irqpilot to apply
// (dry run) a plan that needs it: a kernel with the feature takes it, one
// without refuses it naming the feature. It logs the table docs/lab.md
// keeps: kernel × feature, supported / refused cleanly / failed.
func TestLabKernelFeatures(t *testing.T) {
	needLab(t)
	small, err := Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range labKernels(t) {
		t.Run(v, func(t *testing.T) {
			var script strings.Builder
			script.WriteString("irqpilot inventory --json > /tmp/inv.json\n")
			for i, p := range featurePlans {
				fmt.Fprintf(&script, "printf 'version: 1\\n%s' > /tmp/f%d.yaml\n", strings.ReplaceAll(p.yaml, "\n", "\\n"), i)
				fmt.Fprintf(&script, "irqpilot apply --dry-run /tmp/f%d.yaml > /tmp/f%d.out 2>&1; echo \"@@F %d rc=$?@@\"; cat /tmp/f%d.out\n", i, i, i, i)
			}
			script.WriteString("echo '@@INV@@'; cat /tmp/inv.json\n")
			r := runGuest(t, Options{Shape: small, Kernel: v, Script: script.String()})
			t.Logf("kernel %s (%s): small shape booted and ran in %s", v, r.Kernel, r.Elapsed.Round(100e6))
			head, js, ok := strings.Cut(r.Output, "@@INV@@")
			if !ok {
				t.Fatalf("no inventory:\n%s", r.Output)
			}
			var h host.Host
			if err := json.Unmarshal([]byte(js), &h); err != nil {
				t.Fatalf("inventory: %v\n%s", err, js)
			}
			probed := map[string]*bool{}
			for _, f := range h.Features {
				probed[f.Name] = f.Supported
			}
			parts := reFeatureRC.FindAllStringSubmatchIndex(head, -1)
			if len(parts) != len(featurePlans) {
				t.Fatalf("%d of %d feature plans ran:\n%s", len(parts), len(featurePlans), head)
			}
			for i, m := range parts {
				end := len(head)
				if i+1 < len(parts) {
					end = parts[i+1][0]
				}
				out := head[m[1]:end]
				rc := head[m[4]:m[5]]
				f := featurePlans[i].feature
				verdict := "failed"
				switch {
				case rc == "0":
					verdict = "supported"
				case strings.Contains(out, "this kernel has no "+f):
					verdict = "refused cleanly"
				}
				sup := "unknown"
				if s := probed[f]; s != nil {
					sup = fmt.Sprint(*s)
				}
				t.Logf("| %s | %s | %s | probe: %s |", v, f, verdict, sup)
				if verdict == "failed" {
					t.Errorf("%s on %s: rc %s:\n%s", f, v, rc, out)
				}
				if (verdict == "supported") != (sup == "true") {
					t.Errorf("%s on %s: %s, but the probe says %s", f, v, verdict, sup)
				}
			}
			for _, f := range h.Features {
				if f.Missing() {
					t.Logf("kernel %s cannot: %s (%s not found)", v, f.Name, f.Probe)
				}
			}
		})
	}
}

// TestLabCaptures writes, for each kernel of LAB_KERNELS, the small and
// nics shapes' `irqpilot capture --probe-managed` taken inside the guest
// to $LAB_CAPTURE/lab-SHAPE-VERSION.tar.gz: the fixtures the
// classification tests read (TestLabCapturedKernels).
// It runs only when LAB_CAPTURE names a directory.
func TestLabCaptures(t *testing.T) {
	dir := os.Getenv("LAB_CAPTURE")
	if dir == "" {
		t.Skip("LAB_CAPTURE names the directory the guests' captures are written to")
	}
	needLab(t)
	for _, v := range labKernels(t) {
		for _, name := range []string{"small", "nics"} {
			shape, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(name+"@"+v, func(t *testing.T) {
				r := runGuest(t, Options{Shape: shape, Kernel: v,
					Script: "irqpilot capture --probe-managed -o /tmp/c.tar.gz >/dev/null && echo @@CAP@@ && base64 -w0 /tmp/c.tar.gz && echo && echo @@END@@"})
				_, rest, ok := strings.Cut(r.Output, "@@CAP@@")
				b64, _, ok2 := strings.Cut(rest, "@@END@@")
				if !ok || !ok2 {
					t.Fatalf("no capture:\n%s", r.Output)
				}
				b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
				if err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(dir, "lab-"+name+"-"+v+".tar.gz")
				if err := os.WriteFile(out, b, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("kernel %s (%s): %s, %d bytes", v, r.Kernel, out, len(b))
			})
		}
	}
}
