package kubernetes

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
)

func readSources(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: %v (%d files)", dir, err, len(files))
	}
	var sb strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(b)
	}
	return sb.String()
}

// The ConfigMap holds a policy irqpilot knows and a plan its parser
// accepts, and the DaemonSet passes the one it uses.
func TestConfigMapPlanAndPolicy(t *testing.T) {
	m := load(t)
	cm := m.configmap[0]
	pol := cm.Data["policy"]
	if !slices.Contains(policy.PolicyNames(), pol) {
		t.Errorf("ConfigMap %s: policy %q is not one of %v", cm.Name, pol, policy.PolicyNames())
	}
	text, ok := cm.Data["plan.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no plan.yaml", cm.Name)
	}
	p, err := plan.Parse("configmap.yaml:plan.yaml", []byte(text))
	if err != nil {
		t.Fatalf("ConfigMap %s plan.yaml: %v", cm.Name, err)
	}
	if p.Policy != "" && !slices.Contains(policy.PolicyNames(), p.Policy) {
		t.Errorf("plan.yaml names policy %q, not one of %v", p.Policy, policy.PolicyNames())
	}
	if len(p.IRQs)+len(p.RxQueues)+len(p.TxQueues) == 0 {
		t.Error("plan.yaml places nothing")
	}

	c := m.agent(t)
	f := flags(t, c)
	_, hasPlan := f["plan"]
	_, hasPolicy := f["policy"]
	if hasPlan == hasPolicy {
		t.Fatalf("the agent needs exactly one of --plan and --policy; args %v", c.Args)
	}
	if hasPlan {
		var dir string
		for _, vm := range c.VolumeMounts {
			if vm.MountPath == "/etc/irqpilot" {
				dir = vm.MountPath
			}
		}
		key := path.Base(f["plan"])
		if path.Dir(f["plan"]) != dir || cm.Data[key] == "" {
			t.Errorf("--plan=%s is not a key of ConfigMap %s mounted at %s", f["plan"], cm.Name, dir)
		}
		return
	}
	v := f["policy"]
	if !strings.HasPrefix(v, "$(") || !strings.HasSuffix(v, ")") {
		if !slices.Contains(policy.PolicyNames(), v) {
			t.Errorf("--policy=%s is not a known policy", v)
		}
		return
	}
	env := strings.TrimSuffix(strings.TrimPrefix(v, "$("), ")")
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == env })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.ConfigMapKeyRef == nil {
		t.Fatalf("--policy=%s: %s is not set from the ConfigMap", v, env)
	}
	ref := c.Env[i].ValueFrom.ConfigMapKeyRef
	if ref.Name != cm.Name || ref.Key != "policy" || (ref.Optional != nil && *ref.Optional) {
		t.Errorf("%s comes from ConfigMap %s key %s (optional %v), want %s key policy, required", env, ref.Name, ref.Key, ref.Optional, cm.Name)
	}
}

// The Service selects the agent pods and names the metrics port, and the
// ServiceMonitor selects that Service and port.
func TestServiceAndServiceMonitor(t *testing.T) {
	m := load(t)
	pod := m.daemonset[0].Spec.Template
	svc := m.service[0]
	if !labelsMatch(svc.Spec.Selector, pod.Labels) {
		t.Errorf("Service %s selector %v does not match the pod labels %v", svc.Name, svc.Spec.Selector, pod.Labels)
	}
	c := m.agent(t)
	var svcPort *corev1.ServicePort
	for i, p := range svc.Spec.Ports {
		if p.TargetPort.StrVal == "metrics" || p.TargetPort.IntValue() == 9477 {
			svcPort = &svc.Spec.Ports[i]
		}
	}
	if svcPort == nil || svcPort.Name == "" {
		t.Fatalf("Service %s has no named port for the agent's metrics: %+v", svc.Name, svc.Spec.Ports)
	}
	if svcPort.TargetPort.Type == intstr.String && !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == svcPort.TargetPort.StrVal }) {
		t.Errorf("Service targetPort %q names no container port", svcPort.TargetPort.StrVal)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service clusterIP %q: want None (one endpoint per node, nothing to balance)", svc.Spec.ClusterIP)
	}

	sm := m.monitors[0]
	if len(sm.Spec.Selector.MatchExpressions) != 0 || !labelsMatch(sm.Spec.Selector.MatchLabels, svc.Labels) {
		t.Errorf("ServiceMonitor selector %+v does not select Service %s (labels %v)", sm.Spec.Selector, svc.Name, svc.Labels)
	}
	if !sm.Spec.NamespaceSelector.Any && !slices.Contains(sm.Spec.NamespaceSelector.MatchNames, svc.Namespace) {
		t.Errorf("ServiceMonitor namespaceSelector %+v leaves out %s", sm.Spec.NamespaceSelector, svc.Namespace)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != svcPort.Name || ep.Path != "/metrics" {
		t.Errorf("ServiceMonitor scrapes port %q path %q; the Service's metrics port is %q, the agent serves /metrics", ep.Port, ep.Path, svcPort.Name)
	}
}

// kubectl's built-in kustomize renders the directory (offline: no cluster).
func TestKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed; kustomize rendering not checked")
	}
	out, err := exec.Command(kubectl, "kustomize", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	var kinds []string
	for _, doc := range splitDocs(out) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, tm.Kind)
	}
	slices.Sort(kinds)
	if want := []string{"ConfigMap", "DaemonSet", "Namespace", "Service", "ServiceMonitor"}; !slices.Equal(kinds, want) {
		t.Errorf("kustomize rendered %v, want %v", kinds, want)
	}
	if !bytes.Contains(out, []byte("privileged: true")) {
		t.Errorf("rendered output lost the security context:\n%s", out)
	}
}
