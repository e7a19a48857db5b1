package deploy_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// pod is one side of a connection: a pod's namespace (with its labels)
// and its labels, and for a destination the ports its containers name.
type pod struct {
	ns       string
	nsLabels map[string]string
	labels   map[string]string
	ports    []corev1.ContainerPort
}

// podOf is the pod a workload makes.
func podOf(t *testing.T, w *unstructured.Unstructured) pod {
	t.Helper()
	var tmpl corev1.PodTemplateSpec
	m, _, _ := unstructured.NestedMap(w.Object, "spec", "template")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &tmpl); err != nil {
		t.Fatal(err)
	}
	p := pod{ns: w.GetNamespace(), nsLabels: map[string]string{"kubernetes.io/metadata.name": w.GetNamespace()}, labels: tmpl.Labels}
	for _, c := range tmpl.Spec.Containers {
		p.ports = append(p.ports, c.Ports...)
	}
	return p
}

func selects(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return s.Matches(labels.Set(l))
}

// ingressAllowed evaluates the NetworkPolicies as the network plugin
// would for a TCP connection from src to dst's port: a pod no policy
// with Ingress selects takes every connection; one that some select
// takes those that a rule of one of them allows.
func ingressAllowed(t *testing.T, nps []networkingv1.NetworkPolicy, src, dst pod, port int32) bool {
	t.Helper()
	isolated := false
	for _, np := range nps {
		if np.Namespace != dst.ns || !selects(t, &np.Spec.PodSelector, dst.labels) {
			continue
		}
		hasIngress := len(np.Spec.PolicyTypes) == 0
		for _, pt := range np.Spec.PolicyTypes {
			hasIngress = hasIngress || pt == networkingv1.PolicyTypeIngress
		}
		if !hasIngress {
			continue
		}
		isolated = true
		for _, rule := range np.Spec.Ingress {
			portOK := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
					continue
				}
				switch {
				case p.Port == nil:
					portOK = true
				case p.Port.StrVal != "":
					for _, cp := range dst.ports {
						portOK = portOK || cp.Name == p.Port.StrVal && cp.ContainerPort == port
					}
				default:
					end := p.Port.IntVal
					if p.EndPort != nil {
						end = *p.EndPort
					}
					portOK = portOK || port >= p.Port.IntVal && port <= end
				}
			}
			if !portOK {
				continue
			}
			if len(rule.From) == 0 {
				return true
			}
			for _, peer := range rule.From {
				if peer.IPBlock != nil {
					t.Errorf("policy %s admits an ipBlock %v: every source must be a namespace or pod", np.Name, peer.IPBlock)
					continue
				}
				nsOK := peer.NamespaceSelector == nil && src.ns == np.Namespace ||
					peer.NamespaceSelector != nil && selects(t, peer.NamespaceSelector, src.nsLabels)
				podOK := peer.PodSelector == nil || selects(t, peer.PodSelector, src.labels)
				if nsOK && podOK {
					return true
				}
			}
		}
	}
	return !isolated
}

func policies(t *testing.T, objs []*unstructured.Unstructured) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		var np networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &np); err != nil {
			t.Fatal(err)
		}
		out = append(out, np)
	}
	return out
}

// Nothing connects into fleetlift-system but the sandboxes to their
// gateway, the Ingress controller's namespace to the webhooks and
// Prometheus's to the metrics, each only where an operator labelled the
// namespace; not another namespace's pods, not a pod of fleetlift-system
// itself.
func TestControlPlaneIngress(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			nps := policies(t, objs)
			ns := func(name string, l ...string) map[string]string {
				m := map[string]string{"kubernetes.io/metadata.name": name}
				for i := 0; i+1 < len(l); i += 2 {
					m[l[i]] = l[i+1]
				}
				return m
			}
			sandbox := pod{ns: "sandbox-isolated", nsLabels: ns("sandbox-isolated"), labels: map[string]string{"app.kubernetes.io/component": "sandbox"}}
			notSandbox := pod{ns: "sandbox-isolated", nsLabels: ns("sandbox-isolated"), labels: map[string]string{"app": "other"}}
			other := pod{ns: "default", nsLabels: ns("default"), labels: map[string]string{"app": "web"}}
			prometheus := pod{ns: "monitoring", nsLabels: ns("monitoring", "fleetlift.io/metrics-client", "true"), labels: map[string]string{"app": "prometheus"}}
			ingress := pod{ns: "ingress-nginx", nsLabels: ns("ingress-nginx", "fleetlift.io/webhook-client", "true"), labels: map[string]string{"app": "ingress-nginx"}}
			neighbour := pod{ns: "fleetlift-system", nsLabels: ns("fleetlift-system"), labels: map[string]string{"app": "debug"}}

			var served int
			for _, w := range workloads(objs) {
				if w.GetNamespace() != "fleetlift-system" {
					continue
				}
				dst := podOf(t, w)
				for _, cp := range dst.ports {
					served++
					want := map[string]bool{} // source name -> allowed
					switch cp.Name {
					case "gateway":
						want["sandbox"] = true
					case "webhook":
						want["ingress"] = true
					case "metrics":
						want["prometheus"] = true
					default:
						// Health and any other port: the kubelet's
						// probes come from the node, not a pod.
					}
					for name, src := range map[string]pod{"sandbox": sandbox, "another sandbox-isolated pod": notSandbox,
						"a pod of default": other, "prometheus": prometheus, "ingress": ingress, "a pod of fleetlift-system": neighbour} {
						if got := ingressAllowed(t, nps, src, dst, cp.ContainerPort); got != want[name] {
							t.Errorf("%s → %s %s port %s (%d): allowed %v, want %v", name, w.GetKind(), w.GetName(), cp.Name, cp.ContainerPort, got, want[name])
						}
					}
				}
			}
			if served < 4 {
				t.Fatalf("only %d ports served in fleetlift-system", served)
			}
		})
	}
}

// A drain or an upgrade evicts one replica of a replicated workload at a
// time, and the scheduler spreads the replicas over nodes; no budget is
// left over for a workload an overlay removed.
func TestAvailability(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			var pdbs []policyv1.PodDisruptionBudget
			for _, o := range objs {
				if o.GetKind() == "PodDisruptionBudget" {
					var pdb policyv1.PodDisruptionBudget
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &pdb); err != nil {
						t.Fatal(err)
					}
					pdbs = append(pdbs, pdb)
				}
			}
			used := map[string]bool{}
			for _, w := range workloads(objs) {
				replicas, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
				if replicas < 2 {
					continue
				}
				p := podOf(t, w)
				var budget *policyv1.PodDisruptionBudget
				for i := range pdbs {
					if pdbs[i].Namespace == w.GetNamespace() && selects(t, pdbs[i].Spec.Selector, p.labels) {
						if budget != nil {
							t.Errorf("%s is under two budgets, %s and %s", w.GetName(), budget.Name, pdbs[i].Name)
						}
						budget = &pdbs[i]
						used[pdbs[i].Name] = true
					}
				}
				switch {
				case budget == nil:
					t.Errorf("%s (%d replicas) has no PodDisruptionBudget", w.GetName(), replicas)
				case budget.Spec.MaxUnavailable == nil || budget.Spec.MaxUnavailable.IntValue() != 1:
					t.Errorf("%s's budget %s: maxUnavailable %v, want 1", w.GetName(), budget.Name, budget.Spec.MaxUnavailable)
				}
				var tmpl corev1.PodTemplateSpec
				m, _, _ := unstructured.NestedMap(w.Object, "spec", "template")
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &tmpl); err != nil {
					t.Fatal(err)
				}
				spread := false
				for _, c := range tmpl.Spec.TopologySpreadConstraints {
					spread = spread || c.TopologyKey == corev1.LabelHostname && c.MaxSkew == 1 && selects(t, c.LabelSelector, p.labels)
				}
				if !spread {
					t.Errorf("%s: no topology spread over kubernetes.io/hostname that selects its pods: %+v", w.GetName(), tmpl.Spec.TopologySpreadConstraints)
				}
			}
			for _, pdb := range pdbs {
				if !used[pdb.Name] {
					t.Errorf("PodDisruptionBudget %s selects no replicated workload", pdb.Name)
				}
			}
		})
	}
}

// The Pod Security version is pinned to the Kubernetes the suites run
// (tools/envtest's k8s.io/kubernetes), never latest: an upgrade cannot
// change what the namespaces admit without a change here.
func TestPodSecurityVersionPinned(t *testing.T) {
	mod, err := os.ReadFile("../tools/envtest/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v1\.\d+)\.\d+`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("tools/envtest/go.mod requires no k8s.io/kubernetes")
	}
	want := string(m[1])
	for _, dir := range overlays {
		objs := render(t, dir)
		n := 0
		for _, o := range objs {
			if o.GetKind() != "Namespace" {
				continue
			}
			n++
			l := o.GetLabels()
			for _, mode := range []string{"enforce", "warn"} {
				if l["pod-security.kubernetes.io/"+mode] != "restricted" || l["pod-security.kubernetes.io/"+mode+"-version"] != want {
					t.Errorf("%s: namespace %s: %s %q version %q, want restricted at %s", dir, o.GetName(), mode,
						l["pod-security.kubernetes.io/"+mode], l["pod-security.kubernetes.io/"+mode+"-version"], want)
				}
			}
		}
		if n != 2 {
			t.Errorf("%s: %d namespaces, want fleetlift-system and sandbox-isolated", dir, n)
		}
	}
}

// Every fleetlift process in the cluster logs JSON lines.
func TestLogsAreJSON(t *testing.T) {
	for _, dir := range overlays {
		objs := render(t, dir)
		for _, o := range objs {
			if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "fleetlift-config") {
				if f, _, _ := unstructured.NestedString(o.Object, "data", "FLEETLIFT_LOG_FORMAT"); f != "json" {
					t.Errorf("%s: FLEETLIFT_LOG_FORMAT %q, want json", dir, f)
				}
			}
		}
		// The controller logs JSON always; every other container reads
		// the ConfigMap (TestRenderOverlays checks its envFrom) and
		// takes no --log-format of its own.
		for _, w := range workloads(objs) {
			for _, c := range containers(w) {
				for _, a := range args(c) {
					if strings.HasPrefix(a, "--log-format") {
						t.Errorf("%s: %s sets %s over the ConfigMap's", dir, w.GetName(), a)
					}
				}
			}
		}
	}
}
