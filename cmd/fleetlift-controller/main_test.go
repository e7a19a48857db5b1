package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/metrics/metricstest"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
)

var cp kubetest.Shared

func TestMain(m *testing.M) { os.Exit(cp.Main(m)) }

func freePort(t *testing.T) string {
	t.Helper()
	addr, err := listen.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// The command, run as the shipped controller service account (the
// shipped RBAC, nothing more), elects itself leader, serves probes and
// metrics, logs JSON, and reconciles requests into Jobs.
func TestControllerCommand(t *testing.T) {
	env := cp.Env(t)
	ctx := context.Background()
	system, sandbox := env.Install(t)
	env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-credentials", Namespace: sandbox}, Data: map[string][]byte{"token": []byte("t")}})
	kubeconfig := kubetest.Kubeconfig(t, env.ServiceAccountConfig(system, "fleetlift-controller"))
	metrics, probes := freePort(t), freePort(t)

	var logs syncbuf.Buffer
	cmd := newRootCmd()
	cmd.SetArgs([]string{"--kubeconfig", kubeconfig, "--namespace", sandbox, "--leader-election-namespace", system,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", probes})
	cmd.SetErr(&logs)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(cctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the command: %v", err)
		}
	})

	sbr := &v1alpha1.SandboxRequest{ObjectMeta: metav1.ObjectMeta{Name: "cmd", Namespace: sandbox},
		Spec: v1alpha1.SandboxRequestSpec{TaskID: "t", Image: "fleetlift/sandbox:dev",
			Credentials: []v1alpha1.Credential{{Name: "github-credentials", EnvVar: "FLEETLIFT_FORGE_TOKEN", SecretKey: "token"}}}}
	if err := env.Client.Create(ctx, sbr); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool {
		env.Client.Get(ctx, client.ObjectKeyFromObject(sbr), sbr)
		return sbr.Status.Phase == v1alpha1.PhaseProvisioning && sbr.Status.JobName != ""
	}) {
		t.Fatalf("the request never got a Job: %+v\nlogs:\n%s", sbr.Status, logs.String())
	}
	var lease coordinationv1.Lease
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: system, Name: "fleetlift-controller.fleetlift.io"}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
		t.Errorf("no leader Lease in %s: %v", system, err)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get("http://" + probes + path); code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	code, body := get("http://" + metrics + "/metrics")
	for _, series := range []string{"controller_runtime_reconcile_total", `fleetlift_sandboxrequests{phase="Provisioning"} 1`} {
		if code != http.StatusOK || !strings.Contains(body, series) {
			t.Errorf("/metrics (%d) lacks %s", code, series)
		}
	}
	// Every controller series deploy/monitoring's alerts and dashboard
	// query is one the running controller serves.
	if s, err := metricstest.Parse(strings.NewReader(body)); err != nil {
		t.Errorf("/metrics: %v", err)
	} else {
		queried := metricstest.Queried(t, metricstest.Controller)
		if len(queried) < 5 {
			t.Errorf("deploy/monitoring queries only %v of the controller", queried)
		}
		for _, n := range queried {
			if !s.Has(n) {
				t.Errorf("deploy/monitoring queries %s, which the controller does not serve", n)
			}
		}
	}
	if !eventually(func() bool { return strings.Contains(logs.String(), `"msg":"created the workload"`) }) {
		t.Errorf("no JSON log of the Job's creation:\n%s", logs.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.HasPrefix(line, "{") {
			t.Errorf("a log line that is not JSON: %s", line)
			break
		}
	}
}

// --version says which release the controller is (the images build it
// with -X main.version), and starts nothing.
func TestVersion(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v1.2.3"
	var out, errOut bytes.Buffer
	if code := run([]string{"--version"}, &out, &errOut); code != 0 || out.String() != "fleetlift-controller v1.2.3\n" {
		t.Errorf("--version: exit %d, %q (stderr %q)", code, out.String(), errOut.String())
	}
}

// template prints a SandboxTemplate of the sandbox pod, with the
// credentials by reference, and a warm pool serving it.
func TestTemplateCommand(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"template", "--name", "go", "--namespace", "sbx", "--image", "registry.example.com/go:1",
		"--credential", "FLEETLIFT_FORGE_TOKEN=github-credentials/token", "--replicas", "3"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(out.String(), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d documents; want a template and a warm pool:\n%s", len(docs), out.String())
	}
	var tpl extv1beta1.SandboxTemplate
	var pool extv1beta1.SandboxWarmPool
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &tpl); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &pool); err != nil {
		t.Fatal(err)
	}
	spec := tpl.Spec.PodTemplate.Spec
	if tpl.Namespace != "sbx" || tpl.Spec.EnvVarsInjectionPolicy != extv1beta1.EnvVarsInjectionPolicyAllowed ||
		len(spec.Containers) != 2 || spec.Containers[0].Name != "sandbox" || spec.Containers[1].Name != "exec" ||
		spec.Containers[0].Image != "registry.example.com/go:1" || spec.Containers[1].Image != "registry.example.com/go:1" || *spec.AutomountServiceAccountToken {
		t.Errorf("template = %+v", tpl)
	}
	env := spec.Containers[0].Env
	if len(env) != 1 || env[0].Name != "FLEETLIFT_FORGE_TOKEN" || env[0].ValueFrom == nil || env[0].ValueFrom.SecretKeyRef.Name != "github-credentials" || env[0].Value != "" {
		t.Errorf("the sandbox container's env = %+v; want the credential by reference", env)
	}
	if pool.Spec.TemplateRef.Name != "go" || pool.Spec.Replicas == nil || *pool.Spec.Replicas != 3 {
		t.Errorf("warm pool = %+v", pool.Spec)
	}
}

// --sandbox-processes is what the agent in each sandbox pod holds a
// jailed command to, the controller's pods and the warm pool template's
// alike; none is refused, naming the flag.
func TestSandboxProcesses(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"template", "--name", "go", "--image", "registry.example.com/go:1", "--sandbox-processes", "512"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var tpl extv1beta1.SandboxTemplate
	if err := yaml.Unmarshal([]byte(strings.Split(out.String(), "\n---\n")[0]), &tpl); err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(tpl.Spec.PodTemplate.Spec.Containers[0].Args, " "); !strings.Contains(args, "serve --workspace /workspace --max-processes 512") {
		t.Errorf("the sandbox container's arguments %q do not hold the agent to 512 processes", args)
	}
	for _, args := range [][]string{
		{"template", "--name", "go", "--image", "registry.example.com/go:1", "--sandbox-processes", "0"},
		{"--kubeconfig", filepath.Join(t.TempDir(), "none"), "--sandbox-processes", "-1"},
	} {
		cmd := newRootCmd()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--sandbox-processes") || !strings.Contains(err.Error(), "want 1 or more") {
			t.Errorf("%v: %v; want --sandbox-processes refused", args, err)
		}
	}
}
