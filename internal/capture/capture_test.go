package capture

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

func TestRefuse(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"/proc/interrupts", true},
		{"/proc/irq/36/smp_affinity_list", true},
		{"/sys/class/net/eth0/queues/rx-0/rps_cpus", true},
		{"/proc", true},
		{"/sys", true},
		{"/etc/default/irqbalance", true},
		{"/etc/sysconfig/irqbalance", true},
		{"/proc/812/comm", true},
		{"/proc/812/stat", true},
		{"/proc/812/status", true},
		{"/proc/812/environ", true}, // archived filtered
		{"/proc/812", true},
		{"/proc/812/task/813/comm", true},
		{"/proc/self/stat", true},
		{"/proc/1545/net/softnet_stat", true},
		{"/proc/812/cmdline", false},
		{"/proc/self/cmdline", false},
		{"/proc/812/task/813/cmdline", false},
		{"/proc/812/maps", false},
		{"/proc/812/fd/3", false},
		{"/proc/812/root", false},
		{"/proc/kcore", false},
		{"/proc/kallsyms", false},
		{"/sys/firmware/efi/efivars/x", false},
		{"/sys/kernel/debug/x", false},
		{"/etc/passwd", false},
		{"/etc/default/irqbalance.d/x", false},
		{"/home/user/.ssh/id_rsa", false},
		{"/dev/mem", false},
		{"/", false},
		{"/proc/../etc/shadow", false},
		{"/sysfoo", false},
	} {
		why := Refuse(c.path)
		if (why == "") != c.ok {
			t.Errorf("Refuse(%s) = %q, want allowed=%v", c.path, why, c.ok)
		}
	}
}

func TestFilterEnviron(t *testing.T) {
	env := []byte("PATH=/usr/bin\x00AWS_SECRET_ACCESS_KEY=hunter2\x00IRQBALANCE_BANNED_CPULIST=2-3\x00HOME=/root\x00IRQBALANCE_ONESHOT=1\x00")
	got := Filter("/proc/812/environ", env)
	if string(got) != "IRQBALANCE_BANNED_CPULIST=2-3\x00IRQBALANCE_ONESHOT=1\x00" {
		t.Errorf("filtered environ = %q", got)
	}
	if got := Filter("/proc/812/environ", []byte("SECRET=x\x00")); got == nil || len(got) != 0 {
		t.Errorf("environ without IRQBALANCE_ = %q, want empty", got)
	}
	if got := Filter("/proc/interrupts", env); !bytes.Equal(got, env) {
		t.Error("non-environ file altered")
	}
}

// build writes files (content "->target" makes a symlink, a trailing "/" a
// directory) below a new root.
func build(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		dst := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			os.MkdirAll(dst, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		var err error
		if strings.HasPrefix(c, "->") {
			err = os.Symlink(c[2:], dst)
		} else {
			err = os.WriteFile(dst, []byte(c), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

type tarred struct {
	typ  byte
	body string
	link string
}

func readArchive(t *testing.T, data []byte) map[string]tarred {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]tarred{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		name := strings.TrimSuffix(h.Name, "/")
		if _, dup := out[name]; dup {
			t.Errorf("duplicate entry %s", name)
		}
		out[name] = tarred{h.Typeflag, string(b), h.Linkname}
	}
}

const dev = "sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0"

var machine = map[string]string{
	dev + "/address":                  "52:54:00:12:34:56\n",
	dev + "/mtu":                      "1500\n", // never read: must not be archived
	dev + "/queues/rx-0/rps_cpus":     "0\n",
	dev + "/queues/rx-0/rps_flow_cnt": "0\n",
	dev + "/queues/tx-0/xps_cpus":     "1\n",
	dev + "/device":                   "->../../../virtio2",
	"sys/devices/pci0000:00/0000:00:03.0/virtio2/driver": "->../../../../bus/virtio/drivers/virtio_net",
	"sys/bus/virtio/drivers/virtio_net/bind":             "",
	"sys/class/net/eth0":                                 "->../../" + strings.TrimPrefix(dev, "sys/"),
	"sys/class/net/lo":                                   "->../../devices/virtual/net/lo",
	"sys/devices/virtual/net/lo/mtu":                     "65536\n",
	"proc/interrupts":                                    "           CPU0       CPU1\n 38:          0       3225  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n",
	"proc/irq/38/smp_affinity_list":                      "0-1\n",
	"proc/irq/38/effective_affinity_list":                "1\n",
	"proc/irq/default_smp_affinity":                      "3\n",
	"proc/812/comm":                                      "irqbalance\n",
	"proc/812/cmdline":                                   "/usr/sbin/irqbalance\x00--foreground\x00",
	"proc/812/environ":                                   "PATH=/usr/bin\x00API_TOKEN=s3cr3t\x00IRQBALANCE_BANNED_CPULIST=1\x00",
	"proc/812/maps":                                      "00400000-00452000 r-xp 00000000 08:02 173521 /usr/sbin/irqbalance\n",
	"proc/self":                                          "->812",
	"etc/default/irqbalance":                             "#IRQBALANCE_ONESHOT=\nIRQBALANCE_BANNED_CPULIST=1\n",
	"etc/passwd":                                         "root:x:0:0:root:/root:/bin/bash\n",
	"dev/null":                                           "",
}

// readAll is what a reader of the model would do; it returns what it saw so
// that the same calls on the snapshot can be compared.
func readAll(t *testing.T, f *kernel.FS) []string {
	t.Helper()
	var seen []string
	see := func(what string, v any, err error) {
		s := what + " = "
		if err != nil {
			s += "error " + err.Error()
		} else {
			switch x := v.(type) {
			case []byte:
				s += string(x)
			default:
				s += strings.TrimSpace(strings.ReplaceAll(strings.Join(toStrings(x), " "), "\n", "|"))
			}
		}
		seen = append(seen, s)
	}
	b, err := f.ReadFile("proc/interrupts")
	see("interrupts", b, err)
	names, err := f.NetDevices()
	see("net", names, err)
	for _, n := range names {
		b, err := f.ReadFile("sys/class/net/" + n + "/address")
		see(n+" address", b, err)
		d, err := f.ReadDevice("sys/class/net/" + n + "/device")
		if err == nil {
			see(n+" device", []string{d.Dir, d.Driver}, nil)
		} else {
			see(n+" device", nil, err)
		}
	}
	qs, err := f.NetQueues("eth0")
	for _, q := range qs {
		see("queue", q.Name, nil)
		if q.Rx {
			s, err := f.RPSCPUs("eth0", q.Name)
			see(q.Name+" rps", s.String(), err)
		}
	}
	see("queues", nil, err)
	irqs, err := f.ProcIRQs()
	see("irqs", fmt.Sprint(irqs), err)
	see("38 exists", f.Exists("proc/irq/38"), nil)
	a, err := f.ReadIRQAffinity(38)
	see("38 affinity", a.String(), err)
	_, err = f.ReadFile("proc/irq/38") // EISDIR, replayed from the snapshot
	see("38 as file", nil, err)
	s, err := f.Comm(812)
	see("comm", s, err)
	b, err = f.ReadFile("proc/812/environ")
	see("environ", b, err)
	b, err = f.ReadFile("etc/default/irqbalance")
	see("config", b, err)
	return seen
}

func toStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []string:
		return x
	case bool:
		if x {
			return []string{"true"}
		}
		return []string{"false"}
	case nil:
		return nil
	}
	return []string{"?"}
}

func TestWriteArchivesExactlyWhatWasRead(t *testing.T) {
	root := build(t, machine)
	f := kernel.New(root)
	f.StartRecording()
	live := readAll(t, f)
	// Secrets and paths outside the allowed set that a reader might touch.
	f.ReadFile("proc/812/cmdline")
	f.ReadFile("proc/self/maps")
	f.ReadFile("etc/passwd")
	f.ReadFile("dev/null")
	f.SaveSynthetic("managed.json", []byte(`{"38":"no"}`))
	f.StopRecording()

	var buf bytes.Buffer
	res, err := Write(&buf, f)
	if err != nil {
		t.Fatal(err)
	}
	got := readArchive(t, buf.Bytes())

	// Content is the bytes read; environ is filtered.
	for p, want := range map[string]string{
		"proc/interrupts":                   machine["proc/interrupts"],
		dev + "/address":                    "52:54:00:12:34:56\n",
		dev + "/queues/rx-0/rps_cpus":       "0\n",
		"proc/irq/38/smp_affinity_list":     "0-1\n",
		"proc/812/comm":                     "irqbalance\n",
		"proc/812/environ":                  "IRQBALANCE_BANNED_CPULIST=1\x00",
		"etc/default/irqbalance":            machine["etc/default/irqbalance"],
		"irqpilot/managed.json":             `{"38":"no"}`,
		"proc/irq/default_smp_affinity":     "", // listed, not read: placeholder
		dev + "/queues/tx-0":                "",
		"sys/bus/virtio/drivers/virtio_net": "",
	} {
		e, ok := got[p]
		if !ok {
			t.Errorf("%s not archived", p)
			continue
		}
		if e.body != want {
			t.Errorf("%s = %q, want %q", p, e.body, want)
		}
	}
	// Links on the way, stored as the kernel wrote them.
	for p, want := range map[string]string{
		"sys/class/net/eth0": "../../" + strings.TrimPrefix(dev, "sys/"),
		"sys/class/net/lo":   "../../devices/virtual/net/lo",
		dev + "/device":      "../../../virtio2",
		"sys/devices/pci0000:00/0000:00:03.0/virtio2/driver": "../../../../bus/virtio/drivers/virtio_net",
	} {
		if e := got[p]; e.typ != tar.TypeSymlink || e.link != want {
			t.Errorf("%s = %+v, want symlink to %s", p, e, want)
		}
	}
	// Nothing that was not read, nothing secret, nothing outside.
	for _, p := range []string{
		dev + "/mtu", "sys/devices/virtual/net/lo/mtu", "proc/812/cmdline", "proc/812/maps",
		"etc/passwd", "dev", "dev/null", "sys/bus/virtio/drivers/virtio_net/bind", "proc/self",
	} {
		if _, ok := got[p]; ok {
			t.Errorf("%s archived", p)
		}
	}
	for p, e := range got {
		if strings.Contains(e.body, "s3cr3t") || strings.Contains(e.body, "--foreground") || strings.Contains(e.body, "root:x") {
			t.Errorf("%s holds a secret: %q", p, e.body)
		}
		top := strings.SplitN(p, "/", 2)[0]
		if top != "proc" && top != "sys" && top != "irqpilot" && p != "etc" && p != "etc/default" && p != "etc/default/irqbalance" {
			t.Errorf("%s archived (outside /proc, /sys, irqpilot/)", p)
		}
	}
	var refused []string
	for _, r := range res.Refused {
		refused = append(refused, r.Path)
	}
	sort.Strings(refused)
	want := []string{"/dev/null", "/etc/passwd", "/proc/812/cmdline", "/proc/self/maps"}
	if d := cmp.Diff(want, refused); d != "" {
		t.Errorf("refused (-want +got):\n%s", d)
	}
	if res.Files+res.Dirs+res.Symlinks != len(got) {
		t.Errorf("result counts %+v, archive has %d entries", res, len(got))
	}

	// The snapshot gives every reader call the same answer.
	snapFile := filepath.Join(t.TempDir(), "snap.tar.gz")
	os.WriteFile(snapFile, buf.Bytes(), 0o644)
	sf, cleanup, err := kernel.OpenSnapshot(snapFile)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	replay := readAll(t, sf)
	for i := range live {
		if i < len(replay) && live[i] != replay[i] && !strings.HasPrefix(live[i], "environ") {
			t.Errorf("live %q\nsnap %q", live[i], replay[i])
		}
	}
	if len(live) != len(replay) {
		t.Errorf("live saw %d answers, snapshot %d", len(live), len(replay))
	}
	if _, err := sf.ReadFile("proc/irq/38"); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("replayed read error = %v", err)
	}
	if b, err := sf.ReadSynthetic("managed.json"); err != nil || string(b) != `{"38":"no"}` {
		t.Errorf("synthetic = %q, %v", b, err)
	}

	// Deterministic: the same recording gives the same bytes; capturing the
	// snapshot again gives the same archive.
	var again bytes.Buffer
	if _, err := Write(&again, f); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Errorf("second Write differs (err %v)", err)
	}
	sf.StartRecording()
	readAll(t, sf)
	sf.ReadSynthetic("managed.json")
	sf.StopRecording()
	var recap bytes.Buffer
	if _, err := Write(&recap, sf); err != nil {
		t.Fatal(err)
	}
	regot := readArchive(t, recap.Bytes())
	for p, e := range got {
		if strings.HasPrefix(p, "etc") || p == "proc/812" || strings.HasPrefix(p, "proc/812/") {
			continue
		}
		r, ok := regot[p]
		if ok && e.typ == tar.TypeSymlink {
			// containLink may have rewritten the target to an equivalent one
			dir := filepath.Dir("/" + p)
			same := filepath.Join(dir, r.link) == filepath.Join(dir, e.link)
			r.link, ok = e.link, ok && same
		}
		if !ok || r != e {
			t.Errorf("re-capture: %s = %+v, first capture %+v", p, r, e)
		}
	}
}

func TestRedactCmdline(t *testing.T) {
	got := RedactCmdline("BOOT_IMAGE=/vmlinuz root=UUID=abc ro console=ttyS0 isolcpus=managed_irq,domain,2-7 nohz_full=2-7 irqaffinity=0-1 secret=hunter2 nosmt\n")
	if want := "isolcpus=managed_irq,domain,2-7 nohz_full=2-7 irqaffinity=0-1 nosmt\n"; got != want {
		t.Errorf("RedactCmdline = %q, want %q", got, want)
	}
}
