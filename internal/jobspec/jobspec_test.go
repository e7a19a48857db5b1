package jobspec_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetlift/fleetlift/internal/jobspec"
)

// With UserNamespaces the pod has a user namespace of its own and only
// the agent's container an unmasked /proc, which its jail needs; without
// it the pod is the runtime's default on both.
func TestUserNamespaces(t *testing.T) {
	s := jobspec.Sandbox{ID: "sb", Name: "sb", Namespace: "ns", Image: "fleetlift/sandbox:dev"}
	plain := jobspec.Config{}.PodTemplate(s).Spec
	if plain.HostUsers != nil {
		t.Errorf("without UserNamespaces hostUsers = %v; want unset", *plain.HostUsers)
	}
	for _, c := range plain.Containers {
		if c.SecurityContext.ProcMount != nil {
			t.Errorf("without UserNamespaces container %s has procMount %s", c.Name, *c.SecurityContext.ProcMount)
		}
	}
	spec := jobspec.Config{UserNamespaces: true}.PodTemplate(s).Spec
	if spec.HostUsers == nil || *spec.HostUsers {
		t.Errorf("with UserNamespaces hostUsers = %v; want false", spec.HostUsers)
	}
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		got := c.SecurityContext.ProcMount
		switch {
		case c.Name == jobspec.ContainerSandbox && (got == nil || *got != corev1.UnmaskedProcMount):
			t.Errorf("the agent's container has procMount %v; want Unmasked", got)
		case c.Name != jobspec.ContainerSandbox && got != nil:
			t.Errorf("container %s has procMount %s; want the default", c.Name, *got)
		}
	}
}
