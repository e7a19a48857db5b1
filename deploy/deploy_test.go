package deploy_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/cache"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/diff"
	gsync "github.com/argoproj/argo-cd/gitops-engine/v3/pkg/sync"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/sync/common"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/kube"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/tracing"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/normalize"
	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/fleetlift/fleetlift/internal/kubetest"
)

// The overlays a user points Argo CD or Flux at; each is applied after
// crds, as deploy/gitops does.
var overlays = []string{"overlays/standalone", "overlays/production"}

// render builds a kustomization directory (relative to deploy/) with the
// kustomize library Argo CD and Flux embed.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		out = append(out, u)
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// podSpec is a workload's pod template spec.
func podSpec(o *unstructured.Unstructured) map[string]any {
	spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	return spec
}

func containers(o *unstructured.Unstructured) []map[string]any {
	var out []map[string]any
	for _, field := range []string{"initContainers", "containers"} {
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
		for _, c := range cs {
			out = append(out, c.(map[string]any))
		}
	}
	return out
}

func workloads(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" || o.GetKind() == "StatefulSet" {
			out = append(out, o)
		}
	}
	return out
}

func args(c map[string]any) []string {
	var out []string
	for _, k := range []string{"command", "args"} {
		l, _ := c[k].([]any)
		for _, a := range l {
			out = append(out, a.(string))
		}
	}
	return out
}

// The CRD renders alone, as the first wave.
func TestRenderCRDs(t *testing.T) {
	objs := render(t, "crds")
	if len(objs) != 1 || objs[0].GetKind() != "CustomResourceDefinition" || objs[0].GetName() != "sandboxrequests.fleetlift.io" {
		t.Fatalf("crds renders %d objects, want the SandboxRequest CRD alone", len(objs))
	}
	if w := objs[0].GetAnnotations()["argocd.argoproj.io/sync-wave"]; w != "-1" {
		t.Errorf("CRD sync wave %q, want -1 (before everything that uses it)", w)
	}
}

// What every overlay must hold: images from the one images: list, tokens
// only by reference, restricted containers with requests, the RBAC split's
// service accounts, the sandboxes' NetworkPolicy and quota.
func TestRenderOverlays(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			if find(objs, "CustomResourceDefinition", "sandboxrequests.fleetlift.io") != nil {
				t.Errorf("%s holds the CRD: it belongs to deploy/crds alone, or Flux's two Kustomizations would both own it", dir)
			}
			for _, o := range objs {
				if o.GetKind() == "Secret" {
					t.Errorf("%s renders Secret %s: secrets never come from Git", dir, o.GetName())
				}
			}
			for _, want := range [][2]string{
				{"Namespace", "fleetlift-system"}, {"Namespace", "sandbox-isolated"},
				{"ServiceAccount", "fleetlift-worker"}, {"ServiceAccount", "fleetlift-controller"}, {"ServiceAccount", "sandbox-runner"},
				{"Role", "fleetlift-worker"}, {"Role", "fleetlift-controller"},
				{"NetworkPolicy", "sandbox-egress"}, {"ResourceQuota", "sandbox-quota"}, {"LimitRange", "sandbox-limits"},
				{"Deployment", "fleetlift-controller"},
			} {
				if find(objs, want[0], want[1]) == nil {
					t.Errorf("%s lacks %s %s", dir, want[0], want[1])
				}
			}
			if rb := find(objs, "RoleBinding", "sandbox-runner"); rb != nil {
				t.Errorf("the sandbox runner has a RoleBinding: it must have none")
			}
			if ns := find(objs, "Namespace", "sandbox-isolated"); ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Errorf("sandbox-isolated does not enforce the restricted Pod Security profile: %v", ns.GetLabels())
			}

			var cm *unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "fleetlift-config") {
					cm = o
				}
			}
			if cm == nil {
				t.Fatalf("%s has no fleetlift-config ConfigMap", dir)
			}
			data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
			images := []string{data["FLEETLIFT_SANDBOX_IMAGE"], data["FLEETLIFT_SANDBOX_AGENT_IMAGE"], data["FLEETLIFT_AGENT_IMAGE"]}
			for _, w := range workloads(objs) {
				for _, c := range containers(w) {
					images = append(images, c["image"].(string))
				}
			}
			for _, img := range images {
				if !slices.Contains([]string{"fleetlift/fleetlift:dev", "fleetlift/agent:dev", "fleetlift/sandbox:dev"}, img) {
					t.Errorf("image %q: want one of base/kustomization.yaml's images:, as make images tags them", img)
				}
			}

			for _, w := range workloads(objs) {
				ps := podSpec(w)
				psc, _ := ps["securityContext"].(map[string]any)
				if psc["runAsNonRoot"] != true {
					t.Errorf("%s %s: pod securityContext.runAsNonRoot is not true", w.GetKind(), w.GetName())
				}
				// Service links would put FLEETLIFT_WORKER_SERVICE_HOST and
				// the like beside the configuration, which fleetlift warns of.
				if ps["enableServiceLinks"] != false {
					t.Errorf("%s %s: enableServiceLinks is not false", w.GetKind(), w.GetName())
				}
				for _, c := range containers(w) {
					name := fmt.Sprintf("%s %s container %s", w.GetKind(), w.GetName(), c["name"])
					sc, _ := c["securityContext"].(map[string]any)
					if sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true {
						t.Errorf("%s: securityContext %v, want no privilege escalation and a read-only root", name, sc)
					}
					if req, _, _ := unstructured.NestedMap(c, "resources", "requests"); req["cpu"] == nil || req["memory"] == nil {
						t.Errorf("%s: no CPU and memory requests", name)
					}
					envs, _ := c["env"].([]any)
					for _, e := range envs {
						e := e.(map[string]any)
						n := e["name"].(string)
						if secretish(n) {
							if _, ok, _ := unstructured.NestedMap(e, "valueFrom", "secretKeyRef"); !ok || e["value"] != nil {
								t.Errorf("%s: %s is not from a secretKeyRef", name, n)
							}
						}
					}
					if from, _ := c["envFrom"].([]any); len(from) != 1 {
						t.Errorf("%s: envFrom %v, want fleetlift-config alone", name, from)
					}
				}
			}
			for k, v := range data {
				if secretish(k) && !strings.HasPrefix(v, "/") {
					t.Errorf("fleetlift-config holds %s: tokens belong in Secrets", k)
				}
			}

			// A port named metrics is one fleetlift serves: the command's
			// listener is on it, and a worker's probes ask it.
			for _, o := range objs {
				if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" || o.GetName() == "fleetlift-controller" {
					continue
				}
				c := containers(o)[0]
				ports, _ := c["ports"].([]any)
				if !slices.ContainsFunc(ports, func(p any) bool { return p.(map[string]any)["name"] == "metrics" }) {
					continue
				}
				if a := args(c); !slices.Contains(a, "--metrics-listen=:9090") {
					t.Errorf("%s declares a metrics port but does not serve it: args %v", o.GetName(), a)
				}
				if o.GetName() == "fleetlift-worker" && (c["readinessProbe"] == nil || c["livenessProbe"] == nil) {
					t.Errorf("the worker has no probes")
				}
			}

			ctl := find(objs, "Deployment", "fleetlift-controller")
			if a := args(containers(ctl)[0]); !slices.Contains(a, "--leader-elect") {
				t.Errorf("the controller is not leader-elected: %v", a)
			}
			switch dir {
			case "overlays/production":
				rec := find(objs, "Deployment", "fleetlift-reconciler")
				if rec == nil {
					t.Fatalf("production has no reconciler Deployment")
				}
				if r, _, _ := unstructured.NestedInt64(rec.Object, "spec", "replicas"); r != 2 {
					t.Errorf("reconciler replicas %d, want 2", r)
				}
				if a := args(containers(rec)[0]); a[0] != "reconcile" || !slices.Contains(a, "--leader-elect") {
					t.Errorf("reconciler args %v, want reconcile --leader-elect", a)
				}
				if find(objs, "Deployment", "fleetlift-worker") == nil {
					t.Errorf("production has no worker Deployment")
				}
				for _, w := range []string{"fleetlift-reconciler", "fleetlift-worker"} {
					vols, _, _ := unstructured.NestedSlice(find(objs, "Deployment", w).Object, "spec", "template", "spec", "volumes")
					if !slices.ContainsFunc(vols, func(v any) bool {
						n, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
						return n == "temporal-tls"
					}) {
						t.Errorf("%s does not mount the Secret temporal-tls", w)
					}
				}
				if data["FLEETLIFT_TEMPORAL_TLS_CERT"] == "" || data["FLEETLIFT_TEMPORAL_TLS"] != "true" {
					t.Errorf("production's config does not name the Temporal client certificate: %v", data)
				}
			case "overlays/standalone":
				for _, gone := range []string{"fleetlift-reconciler", "fleetlift-worker"} {
					if find(objs, "Deployment", gone) != nil {
						t.Errorf("standalone keeps Deployment %s: up runs it", gone)
					}
				}
				sts := find(objs, "StatefulSet", "fleetlift")
				if sts == nil {
					t.Fatalf("standalone has no StatefulSet fleetlift")
				}
				if r, _, _ := unstructured.NestedInt64(sts.Object, "spec", "replicas"); r != 1 {
					t.Errorf("standalone replicas %d, want 1", r)
				}
				if a := args(containers(sts)[0]); a[0] != "up" || !slices.Contains(a, "--state-dir=/var/lib/fleetlift/state") {
					t.Errorf("standalone args %v, want up with its state on the volume", a)
				}
				if vct, _, _ := unstructured.NestedSlice(sts.Object, "spec", "volumeClaimTemplates"); len(vct) != 1 {
					t.Errorf("standalone has %d volume claim templates, want one for the SQLite state", len(vct))
				}
				if data["FLEETLIFT_TEMPORAL_ADDRESS"] != "127.0.0.1:7233" {
					t.Errorf("standalone's Temporal address %q, want the embedded server's", data["FLEETLIFT_TEMPORAL_ADDRESS"])
				}
			}
		})
	}
}

// secretish says whether an environment variable holds a credential.
func secretish(name string) bool {
	for _, s := range []string{"TOKEN", "SECRET", "PASSWORD", "API_KEY", "TLS_KEY"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// start starts an empty control plane (no CRDs) for one test.
func start(t *testing.T) *kubetest.Env {
	t.Helper()
	env, err := kubetest.Start(kubetest.Options{NoCRDs: true})
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() { env.Stop() })
	return env
}

// argoInstance is the label Argo CD tracks an Application's resources by.
const argoInstance = "app.kubernetes.io/instance"

// argo is an Argo CD Application's view of one cluster: gitops-engine's
// cluster cache and kubectl wrapper.
type argo struct {
	config  *rest.Config
	cache   cache.ClusterCache
	kubectl kube.Kubectl
}

func newArgo(t *testing.T, config *rest.Config) *argo {
	t.Helper()
	cc := cache.NewClusterCache(config,
		cache.SetLogr(logr.Discard()),
		cache.SetPopulateResourceInfoHandler(func(un *unstructured.Unstructured, _ bool) (any, bool) {
			return un.GetLabels()[argoInstance], false
		}))
	if err := cc.EnsureSynced(); err != nil {
		t.Fatalf("argo cluster cache: %v", err)
	}
	t.Cleanup(func() { cc.Invalidate() })
	return &argo{config: config, cache: cc, kubectl: &kube.KubectlCmd{Log: logr.Discard(), Tracer: tracing.NopTracer{}}}
}

// reconcile pairs the target objects with the live ones, as the
// Application controller does on every refresh.
func (a *argo) reconcile(t *testing.T, objs []*unstructured.Unstructured) gsync.ReconciliationResult {
	t.Helper()
	live, err := a.cache.GetManagedLiveObjs(objs, argoManaged)
	if err != nil {
		t.Fatalf("argo: managed live objects: %v", err)
	}
	return gsync.Reconcile(objs, live, "fleetlift-system", a.cache)
}

// sync runs one sync operation (automated, prune) as the Application
// controller does: each pass builds a sync context from fresh live state
// and the operation's state so far, until the operation completes.
func (a *argo) sync(t *testing.T, objs []*unstructured.Unstructured, hook common.SyncWaveHook) []common.ResourceSyncResult {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	var (
		phase   = common.OperationRunning
		message string
		results []common.ResourceSyncResult
		started = metav1.Now()
	)
	for {
		opts := []gsync.SyncOpt{gsync.WithPrune(true), gsync.WithLogr(logr.Discard()),
			gsync.WithInitialState(phase, message, results, started)}
		if hook != nil {
			opts = append(opts, gsync.WithSyncWaveHook(hook))
		}
		sc, cleanup, err := gsync.NewSyncContext("HEAD", a.reconcile(t, objs), a.config, a.config, a.kubectl, "fleetlift-system", opts...)
		if err != nil {
			t.Fatalf("argo sync: %v", err)
		}
		sc.Sync(ctx)
		phase, message, results = sc.GetState()
		cleanup()
		if phase.Completed() {
			break
		}
		if time.Now().After(deadline) {
			for _, r := range results {
				t.Logf("%s: %s %s %s", r.ResourceKey, r.Status, r.HookPhase, r.Message)
			}
			t.Fatalf("argo sync still %s after 2m: %s", phase, message)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if phase != common.OperationSucceeded {
		t.Errorf("argo sync %s: %s", phase, message)
	}
	for _, r := range results {
		if r.Status != common.ResultCodeSynced {
			t.Errorf("argo sync: %s: %s %s", r.ResourceKey, r.Status, r.Message)
		}
	}
	return results
}

func argoManaged(r *cache.Resource) bool {
	app, _ := r.Info.(string)
	return app == "fleetlift"
}

func tracked(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	for _, o := range objs {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[argoInstance] = "fleetlift"
		o.SetLabels(l)
	}
	return objs
}

// Argo CD: the CRD, then an overlay, synced from an empty cluster; the CRD's
// wave goes first; the Application is then Synced (no diff), and a second
// sync changes nothing.
func TestArgoCD(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			env := start(t)
			rollOut(t, env)
			objs := tracked(append(render(t, "crds"), render(t, dir)...))
			a := newArgo(t, env.Config)

			var waves []int
			first := a.sync(t, objs, func(_ common.SyncPhase, wave int, _ bool) error {
				waves = append(waves, wave)
				return nil
			})
			if len(first) != len(objs) {
				t.Errorf("first sync: %d results for %d objects", len(first), len(objs))
			}
			if len(waves) == 0 || waves[0] != -1 {
				t.Errorf("sync waves %v: want the CRD's wave -1 first", waves)
			}
			crdOrder := -1
			for _, r := range first {
				if r.ResourceKey.Kind == "CustomResourceDefinition" {
					crdOrder = r.Order
				}
			}
			for _, r := range first {
				// gitops-engine bubbles Namespaces up before anything else.
				if k := r.ResourceKey.Kind; k != "CustomResourceDefinition" && k != "Namespace" && r.Order <= crdOrder {
					t.Errorf("%s synced at %d, not after the CRD (%d)", r.ResourceKey, r.Order, crdOrder)
				}
				// RBAC goes through kubectl auth reconcile first, which
				// reports "reconciled"; the rest is created.
				if r.ResourceKey.Group != "rbac.authorization.k8s.io" && !strings.HasSuffix(r.Message, " created") {
					t.Errorf("first sync on an empty cluster: %s: %q, want created", r.ResourceKey, r.Message)
				}
			}

			// Sync status, as Argo CD computes it: no managed object differs.
			// The cache follows the cluster through watches: wait until it
			// has seen every object, as a refresh after the sync would.
			rec := a.reconcile(t, objs)
			for end := time.Now().Add(10 * time.Second); slices.Contains(rec.Live, nil) && time.Now().Before(end); {
				time.Sleep(100 * time.Millisecond)
				rec = a.reconcile(t, objs)
			}
			d, err := diff.DiffArray(context.Background(), rec.Target, rec.Live, diff.WithLogr(logr.Discard()))
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range d.Diffs {
				if r.Modified {
					t.Errorf("OutOfSync after sync: %s %s:\nlive: %s\npredicted: %s", rec.Target[i].GetKind(), rec.Target[i].GetName(), r.NormalizedLive, r.PredictedLive)
				}
			}

			// A second sync changes nothing. kubectl's client-side apply
			// says "configured" for every PodDisruptionBudget, whose
			// selector's patch strategy is replace (the patch it sends is
			// never empty); its generation, labels and annotations say
			// whether anything changed.
			before := fingerprints(t, env, objs)
			for _, r := range a.sync(t, objs, nil) {
				key := r.ResourceKey.Kind + " " + r.ResourceKey.Namespace + "/" + r.ResourceKey.Name
				switch {
				case strings.HasSuffix(r.Message, " unchanged"):
				case r.ResourceKey.Kind == "PodDisruptionBudget" && strings.HasSuffix(r.Message, " configured"):
					if after := fingerprints(t, env, objs)[key]; after != before[key] {
						t.Errorf("second sync changed %s:\n%s\nthen\n%s", key, before[key], after)
					}
				default:
					t.Errorf("second sync changed %s: %q", r.ResourceKey, r.Message)
				}
			}
			assertRBAC(t, env)
			assertRestricted(t, env, objs)
		})
	}
}

// fingerprints are the generation, labels and annotations of objs as
// the cluster holds them, by "Kind namespace/name": what an apply that
// changed them would change.
func fingerprints(t *testing.T, env *kubetest.Env, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatalf("get %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		out[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = fmt.Sprint(live.GetGeneration(), live.GetLabels(), live.GetAnnotations())
	}
	return out
}

// Flux: a Kustomization for deploy/crds, then one for the overlay that
// depends on it, applied as kustomize-controller does (server-side apply in
// stages, then kstatus health); a second apply leaves every object
// unchanged.
func TestFlux(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			env := start(t)
			rollOut(t, env)
			f := newFlux(t, env.Config)

			// fleetlift-crds: wait: true; fleetlift dependsOn it.
			crds := f.apply(t, "fleetlift-crds", "crds")
			f.wait(t, "fleetlift-crds", crds, 30*time.Second)
			app := f.apply(t, "fleetlift", dir)
			for _, e := range append(crds.Entries, app.Entries...) {
				if e.Action != ssa.CreatedAction {
					t.Errorf("first apply on an empty cluster: %s %s, want created", e.Subject, e.Action)
				}
			}
			f.wait(t, "fleetlift", app, 30*time.Second)

			for _, cs := range []*ssa.ChangeSet{f.apply(t, "fleetlift-crds", "crds"), f.apply(t, "fleetlift", dir)} {
				for _, e := range cs.Entries {
					if e.Action != ssa.UnchangedAction {
						t.Errorf("second apply: %s %s, want unchanged", e.Subject, e.Action)
					}
				}
			}
			assertRBAC(t, env)
		})
	}
}

// flux applies kustomizations as Flux's kustomize-controller does:
// server-side apply in stages with Flux's ssa, health by kstatus.
type flux struct{ man *ssa.ResourceManager }

func newFlux(t *testing.T, config *rest.Config) *flux {
	t.Helper()
	hc, err := rest.HTTPClientFor(config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(config, hc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(config, client.Options{Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	return &flux{man: ssa.NewResourceManager(c, polling.NewStatusPoller(c, mapper, polling.Options{}),
		ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"})}
}

// apply renders the kustomization at path and applies it as the Flux
// Kustomization name.
func (f *flux) apply(t *testing.T, name, path string) *ssa.ChangeSet {
	t.Helper()
	objs := render(t, path)
	if err := normalize.UnstructuredList(objs); err != nil {
		t.Fatalf("flux %s: normalize: %v", name, err)
	}
	f.man.SetOwnerLabels(objs, name, "flux-system")
	cs, err := f.man.ApplyAllStaged(context.Background(), objs, ssa.DefaultApplyOptions())
	if err != nil {
		t.Fatalf("flux %s: apply: %v", name, err)
	}
	return cs
}

// wait waits until every object cs applied is healthy, as a
// Kustomization with wait: true does.
func (f *flux) wait(t *testing.T, name string, cs *ssa.ChangeSet, timeout time.Duration) {
	t.Helper()
	if err := f.man.WaitForSet(cs.ToObjMetadataSet(), ssa.WaitOptions{Interval: 500 * time.Millisecond, Timeout: timeout}); err != nil {
		t.Fatalf("flux %s: health checks: %v", name, err)
	}
}

// rollOut plays the controller manager and the kubelet, which this
// control plane lacks: it writes the status a Deployment or StatefulSet
// has once its pods are ready, until the test ends, so that Argo CD's
// health checks and kstatus find the workloads healthy as they would in a
// cluster whose pods start.
func rollOut(t *testing.T, env *kubetest.Env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, kind := range []string{"Deployment", "StatefulSet"} {
				l := &unstructured.UnstructuredList{}
				l.SetAPIVersion("apps/v1")
				l.SetKind(kind + "List")
				if err := env.Client.List(ctx, l); err != nil {
					continue
				}
				for i := range l.Items {
					u := &l.Items[i]
					if g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); g == u.GetGeneration() {
						continue
					}
					n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
					status := map[string]any{
						"observedGeneration": u.GetGeneration(),
						"replicas":           n, "updatedReplicas": n, "readyReplicas": n, "availableReplicas": n,
					}
					if kind == "Deployment" {
						status["conditions"] = []any{
							map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
							map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
						}
					} else {
						status["currentReplicas"] = n
						status["currentRevision"] = u.GetName() + "-1"
						status["updateRevision"] = u.GetName() + "-1"
					}
					u.Object["status"] = status
					env.Client.Status().Update(ctx, u)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// assertRBAC checks the applied RBAC split of seed 001 by impersonating
// the service accounts: the worker may only ask for sandboxes, the
// controller may do what sandboxes need in their namespace only, the
// sandbox runner and the reconciler may do nothing.
func assertRBAC(t *testing.T, env *kubetest.Env) {
	t.Helper()
	const system, sandbox = "fleetlift-system", "sandbox-isolated"
	type access struct{ verb, group, resource, sub, name, ns string }
	can := func(ns, sa string, a access) bool {
		t.Helper()
		cs := kubernetes.NewForConfigOrDie(env.ServiceAccountConfig(ns, sa))
		if a.ns == "" {
			a.ns = sandbox
		}
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Name: a.name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("access review as %s: %v", sa, err)
		}
		return r.Status.Allowed
	}
	sbr := func(verb string) access {
		return access{verb: verb, group: "fleetlift.io", resource: "sandboxrequests"}
	}
	for _, c := range []struct {
		ns, sa  string
		a       access
		allowed bool
	}{
		{system, "fleetlift-worker", sbr("create"), true},
		{system, "fleetlift-worker", sbr("watch"), true},
		{system, "fleetlift-worker", sbr("delete"), true},
		{system, "fleetlift-worker", access{verb: "update", group: "fleetlift.io", resource: "sandboxrequests", sub: "status"}, false},
		{system, "fleetlift-worker", access{verb: "create", group: "batch", resource: "jobs"}, false},
		{system, "fleetlift-worker", access{verb: "create", resource: "pods"}, false},
		{system, "fleetlift-worker", access{verb: "create", resource: "pods", sub: "exec"}, false},
		{system, "fleetlift-worker", access{verb: "get", resource: "secrets", name: "github-credentials"}, false},
		{system, "fleetlift-worker", access{verb: "get", resource: "secrets", ns: system}, false},
		{system, "fleetlift-worker", access{verb: "create", group: "fleetlift.io", resource: "sandboxrequests", ns: system}, false},

		{system, "fleetlift-controller", access{verb: "create", group: "batch", resource: "jobs"}, true},
		{system, "fleetlift-controller", access{verb: "create", resource: "pods", sub: "exec"}, true},
		{system, "fleetlift-controller", access{verb: "get", resource: "secrets", name: "github-credentials"}, true},
		{system, "fleetlift-controller", access{verb: "get", resource: "secrets", name: "other"}, false},
		{system, "fleetlift-controller", access{verb: "list", resource: "secrets"}, false},
		{system, "fleetlift-controller", access{verb: "update", group: "fleetlift.io", resource: "sandboxrequests", sub: "status"}, true},
		{system, "fleetlift-controller", access{verb: "create", group: "batch", resource: "jobs", ns: system}, false},
		{system, "fleetlift-controller", access{verb: "get", resource: "secrets", name: "github-credentials", ns: system}, false},
		{system, "fleetlift-controller", access{verb: "update", group: "coordination.k8s.io", resource: "leases", ns: system}, true},

		{sandbox, "sandbox-runner", sbr("get"), false},
		{sandbox, "sandbox-runner", access{verb: "get", resource: "pods"}, false},
		{sandbox, "sandbox-runner", access{verb: "get", resource: "secrets", name: "github-credentials"}, false},

		{system, "fleetlift-reconciler", sbr("create"), false},
		{system, "fleetlift-reconciler", access{verb: "get", resource: "secrets", ns: system}, false},
	} {
		if got := can(c.ns, c.sa, c.a); got != c.allowed {
			t.Errorf("%s may %s %s/%s %s %q in %s: %v, want %v", c.sa, c.a.verb, c.a.resource, c.a.sub, c.a.group, c.a.name, c.a.ns, got, c.allowed)
		}
	}
}

// assertRestricted creates each workload's pod, as dry run, in its
// namespace, where the Pod Security admission plugin enforces the
// restricted profile: the API server refuses a pod that breaks it.
func assertRestricted(t *testing.T, env *kubetest.Env, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, w := range workloads(objs) {
		tmpl, _, _ := unstructured.NestedMap(w.Object, "spec", "template")
		pod := &unstructured.Unstructured{Object: tmpl}
		pod.SetAPIVersion("v1")
		pod.SetKind("Pod")
		pod.SetNamespace(w.GetNamespace())
		pod.SetName(w.GetName() + "-dry-run")
		// The workload's claims become the pod's volumes.
		vcts, _, _ := unstructured.NestedSlice(w.Object, "spec", "volumeClaimTemplates")
		for _, v := range vcts {
			name, _, _ := unstructured.NestedString(v.(map[string]any), "metadata", "name")
			vols, _, _ := unstructured.NestedSlice(pod.Object, "spec", "volumes")
			vols = append(vols, map[string]any{"name": name, "persistentVolumeClaim": map[string]any{"claimName": name}})
			unstructured.SetNestedSlice(pod.Object, vols, "spec", "volumes")
		}
		if err := env.Client.Create(context.Background(), pod, client.DryRunAll); err != nil {
			t.Errorf("%s %s: its pod is refused in %s: %v", w.GetKind(), w.GetName(), w.GetNamespace(), err)
		}
	}
}

// readYAML decodes every document of a file under deploy/.
func readYAML(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if u.Object != nil {
			out = append(out, u)
		}
	}
	return out
}

// The Argo CD Application and the Flux Kustomizations name what the tests
// above apply, in the order they apply it, with the policies the README
// promises.
func TestGitOps(t *testing.T) {
	t.Run("argocd", func(t *testing.T) {
		docs := readYAML(t, "gitops/argocd/application.yaml")
		if len(docs) != 1 || docs[0].GetKind() != "Application" {
			t.Fatalf("application.yaml: want one Application")
		}
		app := docs[0].Object
		sources, _, _ := unstructured.NestedSlice(app, "spec", "sources")
		var paths []string
		for _, s := range sources {
			p, _, _ := unstructured.NestedString(s.(map[string]any), "path")
			paths = append(paths, p)
		}
		if len(paths) != 2 || paths[0] != "deploy/crds" || !slices.Contains(prefixed("deploy/", overlays), paths[1]) {
			t.Errorf("Application sources %v, want deploy/crds and an overlay", paths)
		}
		auto, ok, _ := unstructured.NestedMap(app, "spec", "syncPolicy", "automated")
		if !ok || auto["prune"] != true || auto["selfHeal"] != false {
			t.Errorf("syncPolicy.automated %v, want prune and no self-heal", auto)
		}
	})
	t.Run("flux", func(t *testing.T) {
		ks := map[string]map[string]any{}
		for _, d := range readYAML(t, "gitops/flux/fleetlift.yaml") {
			if d.GetKind() == "Kustomization" {
				ks[d.GetName()] = d.Object
			}
		}
		crds, app := ks["fleetlift-crds"], ks["fleetlift"]
		if crds == nil || app == nil {
			t.Fatalf("want Kustomizations fleetlift-crds and fleetlift, have %d", len(ks))
		}
		if p, _, _ := unstructured.NestedString(crds, "spec", "path"); p != "./deploy/crds" {
			t.Errorf("fleetlift-crds path %q", p)
		}
		if w, _, _ := unstructured.NestedBool(crds, "spec", "wait"); !w {
			t.Errorf("fleetlift-crds does not wait for the CRD")
		}
		if p, _, _ := unstructured.NestedString(app, "spec", "path"); !slices.Contains(prefixed("./deploy/", overlays), p) {
			t.Errorf("fleetlift path %q, want an overlay", p)
		}
		deps, _, _ := unstructured.NestedSlice(app, "spec", "dependsOn")
		if len(deps) != 1 || deps[0].(map[string]any)["name"] != "fleetlift-crds" {
			t.Errorf("fleetlift dependsOn %v, want fleetlift-crds", deps)
		}
		if w, _, _ := unstructured.NestedBool(app, "spec", "wait"); !w {
			t.Errorf("fleetlift does not wait for its workloads")
		}
	})
}

func prefixed(prefix string, l []string) []string {
	var out []string
	for _, s := range l {
		out = append(out, prefix+s)
	}
	return out
}

// TestSandboxEgress: a sandbox pod reaches DNS and its workers' gateway
// (which serves the egress proxy too), and nothing else: not the
// internet, not the API server's or any Service's address, not another
// pod, not the metadata endpoint.
func TestSandboxEgress(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			obj := find(render(t, dir), "NetworkPolicy", "sandbox-egress")
			if obj == nil {
				t.Fatal("no NetworkPolicy sandbox-egress")
			}
			var np networkingv1.NetworkPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &np); err != nil {
				t.Fatal(err)
			}
			if len(np.Spec.Ingress) != 0 || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				t.Errorf("the sandboxes take connections: %+v", np.Spec)
			}
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				t.Errorf("the policy does not bound the sandboxes' egress: %+v", np.Spec.PolicyTypes)
			}
			// Every rule is the gateway's or DNS's.
			for i, rule := range np.Spec.Egress {
				if !gatewayRule(rule, 8090) && !dnsRule(rule) {
					t.Errorf("egress rule %d allows more than DNS and the workers' gateway: %+v", i, rule)
				}
			}
			for _, c := range []struct {
				addr string
				port int32
			}{
				{"140.82.112.3", 443}, {"2606:50c0:8000::153", 443}, {"140.82.112.3", 22}, {"140.82.112.3", 80},
				{"10.96.0.1", 443}, {"172.20.4.9", 443}, {"192.168.1.10", 443}, {"100.64.0.10", 443},
				{"169.254.169.254", 80}, {"127.0.0.1", 443}, {"::1", 443}, {"fd00:ec2::254", 80}, {"fe80::1", 443},
				{"10.0.0.5", 8090}, {"140.82.112.3", 8090},
			} {
				if egressAllowed(t, np, c.addr, c.port) {
					t.Errorf("TCP %s:%d is allowed; want the workers' gateway and DNS alone", c.addr, c.port)
				}
			}
			// The workers' gateway, which the agents clone, call their
			// model and reach the egress proxy through: its port, on the
			// worker pods alone, where the workers serve it.
			if !gatewayAllowed(np, 8090) {
				t.Errorf("the sandboxes cannot reach the workers' gateway on 8090: %+v", np.Spec.Egress)
			}
			if !slices.ContainsFunc(np.Spec.Egress, dnsRule) {
				t.Errorf("the sandboxes cannot reach DNS: %+v", np.Spec.Egress)
			}
			objs := render(t, dir)
			worker := find(objs, "Deployment", "fleetlift-worker")
			if worker == nil {
				worker = find(objs, "StatefulSet", "fleetlift")
			}
			if worker == nil {
				t.Fatal("no worker")
			}
			containers, _, _ := unstructured.NestedSlice(worker.Object, "spec", "template", "spec", "containers")
			if a := fmt.Sprint(containers); !strings.Contains(a, "--gateway-listen=:8090") || !strings.Contains(a, "--gateway-url=http://$(POD_IP):8090") {
				t.Errorf("the worker does not serve the gateway: %s", a)
			}
			if l, _, _ := unstructured.NestedString(worker.Object, "spec", "template", "metadata", "labels", "fleetlift.io/sandbox-gateway"); l != "true" {
				t.Errorf("the sandboxes may not reach %s's gateway: its pods lack fleetlift.io/sandbox-gateway=true", worker.GetName())
			}
			var config *unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "fleetlift-config") {
					config = o
				}
			}
			if config == nil {
				t.Fatal("no ConfigMap fleetlift-config")
			}
			if refs, _, _ := unstructured.NestedString(config.Object, "data", "FLEETLIFT_SANDBOX_SECRETS"); refs != "" {
				t.Errorf("sandbox pods get Secrets: FLEETLIFT_SANDBOX_SECRETS=%s; want the gateway to hold the tokens", refs)
			}
			for _, v := range []string{"FLEETLIFT_FORGE_TOKEN", "ANTHROPIC_API_KEY"} {
				if !strings.Contains(fmt.Sprint(containers), "name:"+v) {
					t.Errorf("%s does not hold %s for the gateway", worker.GetName(), v)
				}
			}
		})
	}
}

// gatewayAllowed reports whether np lets a pod open TCP to port on the
// pods of fleetlift-system that serve the gateway.
func gatewayAllowed(np networkingv1.NetworkPolicy, port int32) bool {
	return slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool { return gatewayRule(r, port) })
}

// gatewayRule reports whether rule allows TCP to port on the pods of
// fleetlift-system that serve the gateway, and nothing else.
func gatewayRule(rule networkingv1.NetworkPolicyEgressRule, port int32) bool {
	if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || rule.Ports[0].Port.IntVal != port || rule.Ports[0].EndPort != nil ||
		rule.Ports[0].Protocol == nil || *rule.Ports[0].Protocol != corev1.ProtocolTCP || len(rule.To) != 1 {
		return false
	}
	peer := rule.To[0]
	return peer.IPBlock == nil && peer.NamespaceSelector != nil && peer.PodSelector != nil &&
		len(peer.NamespaceSelector.MatchExpressions) == 0 && len(peer.PodSelector.MatchExpressions) == 0 &&
		reflect.DeepEqual(peer.NamespaceSelector.MatchLabels, map[string]string{"kubernetes.io/metadata.name": "fleetlift-system"}) &&
		reflect.DeepEqual(peer.PodSelector.MatchLabels, map[string]string{"fleetlift.io/sandbox-gateway": "true"})
}

// dnsRule reports whether rule allows port 53 in kube-system, and
// nothing else.
func dnsRule(rule networkingv1.NetworkPolicyEgressRule) bool {
	if len(rule.Ports) == 0 || len(rule.To) != 1 {
		return false
	}
	for _, p := range rule.Ports {
		if p.Port == nil || p.Port.IntVal != 53 || p.EndPort != nil {
			return false
		}
	}
	peer := rule.To[0]
	return peer.IPBlock == nil && peer.NamespaceSelector != nil &&
		len(peer.NamespaceSelector.MatchExpressions) == 0 &&
		reflect.DeepEqual(peer.NamespaceSelector.MatchLabels, map[string]string{"kubernetes.io/metadata.name": "kube-system"})
}

// egressAllowed reports whether np lets a pod open TCP to addr:port by an
// ipBlock peer (DNS, allowed by namespace, is not an address here).
func egressAllowed(t *testing.T, np networkingv1.NetworkPolicy, addr string, port int32) bool {
	t.Helper()
	ip := net.ParseIP(addr)
	for _, rule := range np.Spec.Egress {
		portOK := len(rule.Ports) == 0
		for _, p := range rule.Ports {
			if (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) && (p.Port == nil || p.Port.IntVal == port) {
				portOK = true
			}
		}
		if !portOK {
			continue
		}
		if len(rule.To) == 0 {
			return true
		}
		for _, peer := range rule.To {
			if peer.IPBlock == nil {
				continue
			}
			if in(t, ip, peer.IPBlock.CIDR) && !slices.ContainsFunc(peer.IPBlock.Except, func(c string) bool { return in(t, ip, c) }) {
				return true
			}
		}
	}
	return false
}

func in(t *testing.T, ip net.IP, cidr string) bool {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatalf("ipBlock %q: %v", cidr, err)
	}
	return n.Contains(ip)
}
