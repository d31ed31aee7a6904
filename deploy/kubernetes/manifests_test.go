// Package kubernetes holds the Kubernetes manifests of the irqpilot agent
// (kubectl apply -k deploy/kubernetes). No cluster is available to the test
// suite, so this test validates them offline: every document is decoded
// strictly (unknown or duplicate fields are errors) into the k8s.io/api types,
// or, for the Prometheus Operator's ServiceMonitor (not in k8s.io/api), into a
// small struct of the fields used here; then the fields that matter —
// privileges, mounts, probes, the listen address, the plan/policy, the
// Service and ServiceMonitor selectors — are checked against each other and
// against irqpilot itself (policy names, plan parser, flag names, paths).
package kubernetes

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// kustomization is the part of kustomize's Kustomization this directory uses.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor
// used here (field names as in the Prometheus Operator's CRD); strict
// decoding rejects any field not listed, so a typo cannot pass unnoticed.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port        string `json:"port"`
			Path        string `json:"path"`
			Interval    string `json:"interval"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
				Action       string   `json:"action"`
			} `json:"relabelings"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// manifests is every object of the kustomization, decoded.
type manifests struct {
	files     []string
	raw       map[string][]byte // file → bytes
	namespace []*corev1.Namespace
	daemonset []*appsv1.DaemonSet
	configmap []*corev1.ConfigMap
	service   []*corev1.Service
	monitors  []*serviceMonitor
}

func readKustomization(t *testing.T) kustomization {
	t.Helper()
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: apiVersion %q kind %q", k.APIVersion, k.Kind)
	}
	return k
}

// splitDocs splits a YAML stream at its "---" lines and drops documents
// that hold only comments or whitespace.
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(b), -1) {
		empty := true
		for _, l := range strings.Split(d, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// load decodes every document of every resource strictly into its type.
func load(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{raw: map[string][]byte{}}
	for _, f := range readKustomization(t).Resources {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("kustomization.yaml lists %s: %v", f, err)
		}
		m.files = append(m.files, f)
		m.raw[f] = b
		for i, doc := range splitDocs(b) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s document %d: %v", f, i+1, err)
			}
			strict := func(into any) {
				if err := yaml.UnmarshalStrict(doc, into); err != nil {
					t.Fatalf("%s document %d (%s %s): strict decoding: %v", f, i+1, tm.APIVersion, tm.Kind, err)
				}
			}
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 Namespace":
				decodeAppend(strict, &m.namespace)
			case "apps/v1 DaemonSet":
				decodeAppend(strict, &m.daemonset)
			case "v1 ConfigMap":
				decodeAppend(strict, &m.configmap)
			case "v1 Service":
				decodeAppend(strict, &m.service)
			case "monitoring.coreos.com/v1 ServiceMonitor":
				decodeAppend(strict, &m.monitors)
			default:
				t.Fatalf("%s document %d: unexpected %s %s (add it to this test)", f, i+1, tm.APIVersion, tm.Kind)
			}
		}
	}
	if len(m.namespace) != 1 || len(m.daemonset) != 1 || len(m.configmap) != 1 || len(m.service) != 1 || len(m.monitors) != 1 {
		t.Fatalf("want one each of Namespace, DaemonSet, ConfigMap, Service, ServiceMonitor; got %d %d %d %d %d",
			len(m.namespace), len(m.daemonset), len(m.configmap), len(m.service), len(m.monitors))
	}
	return m
}

// decodeAppend decodes a document into a new T and appends it to list.
func decodeAppend[T any](decode func(into any), list *[]*T) {
	o := new(T)
	decode(o)
	*list = append(*list, o)
}

func (m *manifests) agent(t *testing.T) *corev1.Container {
	t.Helper()
	cs := m.daemonset[0].Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("DaemonSet has %d containers, want the agent only", len(cs))
	}
	return &cs[0]
}

// flags returns the container's --name=value arguments after "agent".
func flags(t *testing.T, c *corev1.Container) map[string]string {
	t.Helper()
	if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "agent" {
		t.Fatalf("container runs %v %v, want the image's irqpilot with args agent …", c.Command, c.Args)
	}
	out := map[string]string{}
	for _, a := range c.Args[1:] {
		k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			t.Fatalf("argument %q: write flags as --name=value", a)
		}
		if _, dup := out[k]; dup {
			t.Fatalf("flag --%s given twice", k)
		}
		out[k] = v
	}
	return out
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	k := readKustomization(t)
	yamls, _ := filepath.Glob("*.yaml")
	for _, f := range yamls {
		if f != "kustomization.yaml" && !slices.Contains(k.Resources, f) {
			t.Errorf("%s is not listed in kustomization.yaml", f)
		}
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(r); err != nil {
			t.Errorf("kustomization.yaml lists %s: %v", r, err)
		}
	}
	m := load(t)
	ns := m.namespace[0].Name
	if got := m.namespace[0].Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
		t.Errorf("namespace %s: pod-security enforce %q; the privileged agent would be rejected", ns, got)
	}
	for _, o := range []metav1.ObjectMeta{m.daemonset[0].ObjectMeta, m.configmap[0].ObjectMeta, m.service[0].ObjectMeta, m.monitors[0].ObjectMeta} {
		if o.Namespace != ns {
			t.Errorf("%s is in namespace %q, not %q", o.Name, o.Namespace, ns)
		}
	}
}

func TestDaemonSetPrivileges(t *testing.T) {
	m := load(t)
	ds := m.daemonset[0]
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork {
		t.Error("hostNetwork is off: the agent would tune the pod's network namespace, not the node's NICs")
	}
	if !spec.HostPID {
		t.Error("hostPID is off: the agent could neither pin application threads nor see irqbalance")
	}
	if spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("dnsPolicy %q with hostNetwork", spec.DNSPolicy)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the agent does not use the Kubernetes API; do not mount a service account token")
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Operator == corev1.TolerationOpExists && tl.Key == "" && tl.Effect == ""
	}) {
		t.Errorf("tolerations %v do not tolerate every taint (operator Exists, no key): the agent would miss tainted nodes", spec.Tolerations)
	}
	if !labelsMatch(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) {
		t.Errorf("DaemonSet selector %v does not match its pod labels %v", ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
	}
	c := m.agent(t)
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("agent container has no securityContext")
	}
	// privileged is required (writable /proc/irq); the manifest must say why.
	if sc.Privileged == nil || !*sc.Privileged {
		t.Error("not privileged: /proc/irq stays read-only in the container and no IRQ can be moved")
	} else if !bytes.Contains(m.raw["daemonset.yaml"], []byte("privileged: true, because")) {
		t.Error("privileged: true without the justification comment in daemonset.yaml")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.RunAsNonRoot == nil || *sc.RunAsNonRoot {
		t.Errorf("runAsUser %v runAsNonRoot %v: the agent must run as uid 0", sc.RunAsUser, sc.RunAsNonRoot)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is off")
	}
	// Exactly the capabilities the agent uses: CAP_NET_ADMIN (net sysfs
	// queue and NAPI files, ethtool, netdev netlink) and CAP_SYS_NICE
	// (sched_setaffinity of other processes); everything else dropped.
	if sc.Capabilities == nil {
		t.Fatal("no capabilities set")
	}
	var add []string
	for _, c := range sc.Capabilities.Add {
		add = append(add, string(c))
	}
	slices.Sort(add)
	if !slices.Equal(add, []string{"NET_ADMIN", "SYS_NICE"}) {
		t.Errorf("capabilities added %v, want exactly [NET_ADMIN SYS_NICE]", add)
	}
	if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("capabilities dropped %v, want [ALL]", sc.Capabilities.Drop)
	}
	r := c.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			t.Errorf("%s request %s limit %s: want both, request ≤ limit", name, req.String(), lim.String())
		}
	}
}

func labelsMatch(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The writable host mounts the agent needs, and the paths irqpilot uses.
func TestDaemonSetMounts(t *testing.T) {
	m := load(t)
	spec := m.daemonset[0].Spec.Template.Spec
	c := m.agent(t)
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{} // mountPath → mount
	for _, vm := range c.VolumeMounts {
		if _, ok := vols[vm.Name]; !ok {
			t.Errorf("mount %s names no volume %q", vm.MountPath, vm.Name)
		}
		mounts[vm.MountPath] = vm
	}
	hostPath := func(mountPath, want string, typ corev1.HostPathType) {
		t.Helper()
		vm, ok := mounts[mountPath]
		if !ok {
			t.Errorf("nothing mounted at %s", mountPath)
			return
		}
		if vm.ReadOnly {
			t.Errorf("%s is mounted read-only; the agent writes there", mountPath)
		}
		hp := vols[vm.Name].HostPath
		if hp == nil || hp.Path != want || hp.Type == nil || *hp.Type != typ {
			t.Errorf("%s: volume %s is %+v, want hostPath %s type %s", mountPath, vm.Name, vols[vm.Name].VolumeSource, want, typ)
		}
	}
	// /sys/class/net/*/queues and NAPI files are written: the host's sysfs, writable.
	hostPath("/sys", "/sys", corev1.HostPathDirectory)
	// Journals, managed record, status socket: the node's state directory.
	hostPath(apply.DefaultStateDir, apply.DefaultStateDir, corev1.HostPathDirectoryOrCreate)
	// The machine-wide write lock, shared with irqpilot on the node.
	hostPath(kernel.WriteLockPath, kernel.WriteLockPath, corev1.HostPathFileOrCreate)
	// /proc/irq is written through the runtime's /proc (hostPID, privileged):
	// runc refuses volumes inside /proc, so none may be declared there.
	for p := range mounts {
		if p == "/proc" || strings.HasPrefix(p, "/proc/") {
			t.Errorf("volume mounted at %s: runc refuses mounts inside /proc; hostPID gives the host's /proc", p)
		}
	}
	if f := flags(t, c); f["state-dir"] != apply.DefaultStateDir {
		t.Errorf("--state-dir=%q, want the mounted %s", f["state-dir"], apply.DefaultStateDir)
	}
	cfg, ok := mounts["/etc/irqpilot"]
	if !ok || !cfg.ReadOnly || vols[cfg.Name].ConfigMap == nil || vols[cfg.Name].ConfigMap.Name != m.configmap[0].Name {
		t.Errorf("ConfigMap %s not mounted read-only at /etc/irqpilot: %+v", m.configmap[0].Name, cfg)
	}
}

// The agent listens where Prometheus and the probes reach it.
func TestDaemonSetListenAndProbes(t *testing.T) {
	m := load(t)
	c := m.agent(t)
	f := flags(t, c)
	listen := f["listen"]
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("--listen=%q: %v", listen, err)
	}
	// The agent's default is loopback, unreachable for Prometheus.
	switch host {
	case "0.0.0.0", "::":
	case "$(POD_IP)":
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP"
		}) {
			t.Error("--listen uses $(POD_IP) but POD_IP is not the downward-API status.podIP")
		}
	default:
		t.Errorf("--listen=%s: want the pod (= node) IP or 0.0.0.0 so Prometheus can scrape it", listen)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatalf("--listen port %q: %v", portText, err)
	}
	named := map[string]int32{}
	for _, p := range c.Ports {
		named[p.Name] = p.ContainerPort
	}
	if named["metrics"] != int32(port) {
		t.Errorf("container port metrics = %d, --listen port %d", named["metrics"], port)
	}
	resolve := func(p intstr.IntOrString) int {
		if p.Type == intstr.String {
			return int(named[p.StrVal])
		}
		return p.IntValue()
	}
	if pr := c.ReadinessProbe; pr == nil || pr.HTTPGet == nil {
		t.Errorf("readiness probe: want an HTTP GET of /metrics")
	} else {
		if pr.HTTPGet.Path != "/metrics" || resolve(pr.HTTPGet.Port) != port {
			t.Errorf("readiness probe GET %s port %v; the agent serves /metrics on port %d", pr.HTTPGet.Path, pr.HTTPGet.Port.String(), port)
		}
		if pr.HTTPGet.Host != "" {
			t.Errorf("readiness probe host %q: leave it empty (the pod IP, where the agent listens)", pr.HTTPGet.Host)
		}
	}
	// Liveness does not share the public listener: any host user can
	// load it with connections, and the kubelet would restart a healthy
	// agent. It asks the agent over its status socket in the state
	// directory the agent is given.
	if pr := c.LivenessProbe; pr == nil || pr.Exec == nil {
		t.Errorf("liveness probe: want an exec of irqpilot status (the status socket), not the metrics listener")
	} else {
		cmd := pr.Exec.Command
		if len(cmd) < 2 || cmd[0] != "/irqpilot" || cmd[1] != "status" || !slices.Contains(cmd, "--state-dir="+f["state-dir"]) {
			t.Errorf("liveness probe %q: want /irqpilot status --state-dir=%s", cmd, f["state-dir"])
		}
	}
	// Every flag given exists in the agent command (cmd/irqpilot).
	src := readSources(t, "../../cmd/irqpilot")
	for k := range f {
		if !strings.Contains(src, strconv.Quote(k)) {
			t.Errorf("--%s: no such flag in cmd/irqpilot", k)
		}
	}
}
