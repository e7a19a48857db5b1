package controller

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
)

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

// TestPodNodeSelector: the pod runs where the controller says, whatever
// the request asked.
func TestPodNodeSelector(t *testing.T) {
	p := Policy{NodeSelector: map[string]string{"pool": "sandbox"}, NodeLabels: []string{"arch"}}
	got := p.PodNodeSelector(v1alpha1.SandboxRequestSpec{NodeSelector: map[string]string{"arch": "arm64"}})
	if want := map[string]string{"pool": "sandbox", "arch": "arm64"}; !maps.Equal(got, want) {
		t.Errorf("PodNodeSelector = %v, want %v", got, want)
	}
	if got := (Policy{}).PodNodeSelector(v1alpha1.SandboxRequestSpec{}); got != nil {
		t.Errorf("no selectors: PodNodeSelector = %v, want none", got)
	}
}

func TestPolicyCheck(t *testing.T) {
	p := Policy{
		Images:    []string{"fleetlift/sandbox:*", "registry.example.com/team/*", "exact/image:1"},
		MaxMemory: q("8Gi"), MaxCPU: q("4"),
		Secrets:      []string{"github-credentials"},
		NodeSelector: map[string]string{"pool": "sandbox"}, NodeLabels: []string{"arch"},
	}
	ok := v1alpha1.SandboxRequestSpec{
		Image:       "fleetlift/sandbox:dev",
		Env:         map[string]string{"A_1": "x"},
		Credentials: []v1alpha1.Credential{{Name: "github-credentials", EnvVar: "TOKEN", SecretKey: "t"}},
	}
	for _, c := range []struct {
		name   string
		mutate func(*v1alpha1.SandboxRequestSpec, *v1alpha1.Resources)
		kinds  []string
	}{
		{"allowed", func(*v1alpha1.SandboxRequestSpec, *v1alpha1.Resources) {}, nil},
		{"image below a prefix", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Image = "registry.example.com/team/go/tool:1.2"
		}, nil},
		{"exact image", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) { s.Image = "exact/image:1" }, nil},
		{"other tag of an exact image", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) { s.Image = "exact/image:2" }, []string{"image"}},
		{"image elsewhere", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) { s.Image = "registry.example.com/other/x" }, []string{"image"}},
		{"memory at the maximum", func(_ *v1alpha1.SandboxRequestSpec, r *v1alpha1.Resources) { r.Limits.Memory = q("8Gi") }, nil},
		{"memory above", func(_ *v1alpha1.SandboxRequestSpec, r *v1alpha1.Resources) { r.Limits.Memory = q("9Gi") }, []string{"memory"}},
		{"cpu request above", func(_ *v1alpha1.SandboxRequestSpec, r *v1alpha1.Resources) { r.Requests.CPU = q("5") }, []string{"cpu"}},
		{"secret", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) { s.Credentials[0].Name = "other" }, []string{"secret"}},
		{"reserved env", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Env = map[string]string{"AGENT_WORKDIR": "/"}
		}, []string{"env"}},
		{"env sets a credential", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) { s.Env = map[string]string{"TOKEN": "x"} }, []string{"env"}},
		{"bad env name", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) { s.Env = map[string]string{"1X": "x"} }, []string{"env"}},
		{"env steers the agent: LD_PRELOAD", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Env = map[string]string{"LD_PRELOAD": "x"}
		}, []string{"env"}},
		{"env steers the agent: PATH", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) { s.Env = map[string]string{"PATH": "x"} }, []string{"env"}},
		{"env steers the agent: GIT_SSH_COMMAND", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Env = map[string]string{"GIT_SSH_COMMAND": "x"}
		}, []string{"env"}},
		{"env steers the agent: GIT_SSL_CAINFO", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Env = map[string]string{"GIT_SSL_CAINFO": "x"}
		}, []string{"env"}},
		{"env steers the agent: SSL_CERT_FILE", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Env = map[string]string{"SSL_CERT_FILE": "x"}
		}, []string{"env"}},
		{"env steers the agent: FLEETLIFT_GIT_TOKEN_ORIGINS", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Env = map[string]string{"FLEETLIFT_GIT_TOKEN_ORIGINS": "x"}
		}, []string{"env"}},
		{"env steers the agent: FLEETLIFT_FORGE_URL", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Env = map[string]string{"FLEETLIFT_FORGE_URL": "x"}
		}, []string{"env"}},
		{"env steers the agent: FLEETLIFT_AGENT_CLI", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Env = map[string]string{"FLEETLIFT_AGENT_CLI": "x"}
		}, []string{"env"}},
		{"env steers the agent: FLEETLIFT_AGENT_CLI_ENV", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Env = map[string]string{"FLEETLIFT_AGENT_CLI_ENV": "x"}
		}, []string{"env"}},
		{"env steers the agent: BASH_ENV", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.Env = map[string]string{"BASH_ENV": "x"}
		}, []string{"env"}},
		{"node selector the controller allows", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.NodeSelector = map[string]string{"pool": "sandbox", "arch": "arm64"}
		}, nil},
		{"node selector onto the control plane", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.NodeSelector = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		}, []string{"node-selector"}},
		{"node selector contradicting the controller's", func(s *v1alpha1.SandboxRequestSpec, _ *v1alpha1.Resources) {
			s.NodeSelector = map[string]string{"pool": "system"}
		}, []string{"node-selector"}},
		{"several", func(s *v1alpha1.SandboxRequestSpec, r *v1alpha1.Resources) {
			s.Image, r.Limits.CPU = "x", q("64")
		}, []string{"image", "cpu"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := *ok.DeepCopy()
			var res v1alpha1.Resources
			c.mutate(&spec, &res)
			err := p.Check(spec, res)
			var refusal *Refusal
			switch {
			case c.kinds == nil && err != nil:
				t.Errorf("Check = %v; want allowed", err)
			case c.kinds != nil && !errors.As(err, &refusal):
				t.Errorf("Check = %v; want a refusal for %v", err, c.kinds)
			case c.kinds != nil && !slices.Equal(refusal.Kinds, c.kinds):
				t.Errorf("refused for %v (%v); want %v", refusal.Kinds, err, c.kinds)
			}
			for _, k := range c.kinds {
				if !slices.Contains(refusalRules, k) {
					t.Errorf("rule %s is not among refusalRules, whose refusal series start at 0", k)
				}
			}
		})
	}
	// Runtime class.
	p.RuntimeClass = "gvisor"
	if err := p.Check(ok, v1alpha1.Resources{}); err == nil {
		t.Error("a request without the required runtime class passes")
	}
	ok.RuntimeClassName = "gvisor"
	if err := p.Check(ok, v1alpha1.Resources{}); err != nil {
		t.Errorf("a request with the required runtime class: %v", err)
	}
}

func TestFitJSON(t *testing.T) {
	for _, c := range []struct {
		name, in string
		cut      bool
		max      int
		want     string
	}{
		{"fits", "hello", false, 10, "hello"},
		{"cut before", "hello", true, 100, "hello... [truncated]"},
		{"too long", "0123456789abcdefghijklmnopqrstuvwxyz", false, 20, "01234... [truncated]"},
		{"escapes count", `""""""""""`, false, 19, `""... [truncated]`},
		{"whole runes", "éééééééééé", false, 19, "éé... [truncated]"},
	} {
		if got := fitJSON([]byte(c.in), c.cut, c.max); got != c.want {
			t.Errorf("%s: fitJSON = %q; want %q", c.name, got, c.want)
		}
	}
}

// A sandbox pod's environment is the request's and what the controller
// decides: where the clone token goes, which agent CLI runs, and that
// every credential but the clone token is the agent CLI's alone.
func TestPodEnv(t *testing.T) {
	p := Policy{GitTokenOrigins: []string{"https://github.com", "https://ghe.example.com"}, AgentCLI: `["claude","-p"]`}
	spec := v1alpha1.SandboxRequestSpec{
		Env: map[string]string{"GOPROXY": "off"},
		Credentials: []v1alpha1.Credential{
			{Name: "github-credentials", EnvVar: "FLEETLIFT_GIT_TOKEN", SecretKey: "token"},
			{Name: "claude-credentials", EnvVar: "ANTHROPIC_API_KEY", SecretKey: "api-key"},
			{Name: "other", EnvVar: "OTHER_KEY", SecretKey: "k"},
		},
	}
	got := p.PodEnv(spec)
	want := map[string]string{
		"GOPROXY":                     "off",
		"FLEETLIFT_GIT_TOKEN_ORIGINS": "https://github.com,https://ghe.example.com",
		"FLEETLIFT_AGENT_CLI":         `["claude","-p"]`,
		"FLEETLIFT_AGENT_CLI_ENV":     "ANTHROPIC_API_KEY,OTHER_KEY",
	}
	if !maps.Equal(got, want) {
		t.Errorf("PodEnv = %v\nwant %v", got, want)
	}
	if len(spec.Env) != 1 {
		t.Errorf("PodEnv changed the request's env: %v", spec.Env)
	}
	if got := (Policy{}).PodEnv(v1alpha1.SandboxRequestSpec{}); len(got) != 0 {
		t.Errorf("an empty policy's PodEnv = %v", got)
	}
}
