package v1alpha1_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/kubetest"
)

var cp kubetest.Shared

func TestMain(m *testing.M) { os.Exit(cp.Main(m)) }

func request(ns, name string) *v1alpha1.SandboxRequest {
	mem := resource.MustParse("1Gi")
	return &v1alpha1.SandboxRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.SandboxRequestSpec{
			TaskID:      "task-1",
			Image:       "fleetlift/sandbox:dev",
			Env:         map[string]string{"A": "1"},
			Resources:   v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: &mem}},
			Credentials: []v1alpha1.Credential{{Name: "github-credentials", EnvVar: "FLEETLIFT_FORGE_TOKEN", SecretKey: "token"}},
		},
	}
}

// The CRD the API server serves defaults, validates and protects the
// fields as the types say.
func TestCRD(t *testing.T) {
	env := cp.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "crd", nil)
	c := env.Client

	sbr := request(ns, "defaults")
	if err := c.Create(ctx, sbr); err != nil {
		t.Fatalf("create: %v", err)
	}
	if sbr.Spec.WorkingDir != "/workspace" || sbr.Spec.TTLSecondsAfterFinished == nil || *sbr.Spec.TTLSecondsAfterFinished != 3600 {
		t.Errorf("defaults: workingDir %q, ttlSecondsAfterFinished %v; want /workspace and 3600", sbr.Spec.WorkingDir, sbr.Spec.TTLSecondsAfterFinished)
	}

	// Exec requests come and go; everything else is fixed.
	patch := client.MergeFrom(sbr.DeepCopy())
	sbr.Spec.ExecRequests = []v1alpha1.ExecRequest{{ID: "1", Command: []string{"true"}}}
	if err := c.Patch(ctx, sbr, patch); err != nil {
		t.Errorf("append an exec request: %v", err)
	}
	for name, mutate := range map[string]func(*v1alpha1.SandboxRequestSpec){
		"image":       func(s *v1alpha1.SandboxRequestSpec) { s.Image = "evil/image" },
		"taskId":      func(s *v1alpha1.SandboxRequestSpec) { s.TaskID = "other" },
		"env":         func(s *v1alpha1.SandboxRequestSpec) { s.Env["B"] = "2" },
		"env removed": func(s *v1alpha1.SandboxRequestSpec) { s.Env = nil },
		"credentials": func(s *v1alpha1.SandboxRequestSpec) { s.Credentials[0].Name = "controller-token" },
		"resources":   func(s *v1alpha1.SandboxRequestSpec) { s.Resources = v1alpha1.Resources{} },
		"runtime":     func(s *v1alpha1.SandboxRequestSpec) { s.RuntimeClassName = "runc" },
		"nodeSelector": func(s *v1alpha1.SandboxRequestSpec) {
			s.NodeSelector = map[string]string{"any": "node"}
		},
		"ttl": func(s *v1alpha1.SandboxRequestSpec) { v := int32(1); s.TTLSecondsAfterFinished = &v },
	} {
		changed := sbr.DeepCopy()
		mutate(&changed.Spec)
		if err := c.Update(ctx, changed); err == nil || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("change %s: %v; want it refused as immutable", name, err)
		}
	}

	for name, mutate := range map[string]func(*v1alpha1.SandboxRequest){
		"taskId not a label value": func(s *v1alpha1.SandboxRequest) { s.Spec.TaskID = "a/b" },
		"no image":                 func(s *v1alpha1.SandboxRequest) { s.Spec.Image = "" },
		"relative workingDir":      func(s *v1alpha1.SandboxRequest) { s.Spec.WorkingDir = "work" },
		"bad envVar":               func(s *v1alpha1.SandboxRequest) { s.Spec.Credentials[0].EnvVar = "A-B" },
		"empty command": func(s *v1alpha1.SandboxRequest) {
			s.Spec.ExecRequests = []v1alpha1.ExecRequest{{ID: "1"}}
		},
		"duplicate exec id": func(s *v1alpha1.SandboxRequest) {
			s.Spec.ExecRequests = []v1alpha1.ExecRequest{{ID: "1", Command: []string{"a"}}, {ID: "1", Command: []string{"b"}}}
		},
		"bad phase": func(s *v1alpha1.SandboxRequest) { s.Status.Phase = "Lost" },
	} {
		bad := request(ns, "bad-"+strings.ReplaceAll(name, " ", "-"))
		mutate(bad)
		var err error
		if phase := bad.Status.Phase; phase != "" {
			// The status subresource: the create drops the status.
			if err = c.Create(ctx, bad); err == nil {
				bad.Status.Phase = phase
				err = c.Status().Update(ctx, bad)
			}
		} else {
			err = c.Create(ctx, bad)
		}
		if err == nil {
			t.Errorf("%s: accepted; want it refused", name)
		}
	}
}

// kubectl finds the resource as sbr and in the fleetlift category.
func TestDiscovery(t *testing.T) {
	env := cp.Env(t)
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.Config)
	list, err := dc.ServerResourcesForGroupVersion(v1alpha1.GroupVersion.String())
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	for _, r := range list.APIResources {
		if r.Name == "sandboxrequests" {
			if !slices.Contains(r.ShortNames, "sbr") || !slices.Contains(r.Categories, "fleetlift") || !r.Namespaced {
				t.Errorf("sandboxrequests: short names %v, categories %v, namespaced %v; want sbr, fleetlift, true", r.ShortNames, r.Categories, r.Namespaced)
			}
			return
		}
	}
	t.Errorf("no sandboxrequests in %s", v1alpha1.GroupVersion)
}
