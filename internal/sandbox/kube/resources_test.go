package kube

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// A definition's limits and requests reach the sandbox request; a
// request above its limit, or a quantity that is none, is refused with
// the field named.
func TestResources(t *testing.T) {
	for _, c := range []struct {
		name string
		in   sandbox.Resources
		want string // limits/requests as memory,cpu; or the error
	}{
		{"none", sandbox.Resources{}, "<nil>,<nil> <nil>,<nil>"},
		{"limits", sandbox.Resources{Memory: "2Gi", CPU: "1"}, "2Gi,1 <nil>,<nil>"},
		{"both", sandbox.Resources{Memory: "2Gi", CPU: "1", RequestMemory: "512Mi", RequestCPU: "500m"}, "2Gi,1 512Mi,500m"},
		{"requests alone", sandbox.Resources{RequestMemory: "512Mi"}, "<nil>,<nil> 512Mi,<nil>"},
		{"request equal to limit", sandbox.Resources{Memory: "1Gi", RequestMemory: "1024Mi"}, "1Gi,<nil> 1Gi,<nil>"},
		{"memory request above limit", sandbox.Resources{Memory: "1Gi", RequestMemory: "2Gi"}, "sandbox.resources.requests.memory 2Gi is above the limit 1Gi"},
		{"cpu request above limit", sandbox.Resources{CPU: "500m", RequestCPU: "1"}, "sandbox.resources.requests.cpu 1 is above the limit 500m"},
		{"bad request", sandbox.Resources{RequestCPU: "lots"}, `sandbox.resources.requests.cpu "lots"`},
		{"bad limit", sandbox.Resources{Memory: "1x"}, `sandbox.resources.limits.memory "1x"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := resources(c.in)
			if err != nil {
				if !strings.HasPrefix(err.Error(), c.want) {
					t.Errorf("error %q, want it to start with %q", err, c.want)
				}
				return
			}
			q := func(v *resource.Quantity) string {
				if v == nil {
					return "<nil>"
				}
				return v.String()
			}
			got := q(r.Limits.Memory) + "," + q(r.Limits.CPU) + " " + q(r.Requests.Memory) + "," + q(r.Requests.CPU)
			if got != c.want {
				t.Errorf("limits,requests %s, want %s", got, c.want)
			}
		})
	}
}
