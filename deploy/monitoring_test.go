package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// The monitoring component, added to each overlay: its ServiceMonitor
// scrapes the metrics port of every fleetlift Service that has one
// (the reconciler's, the workers', the controller's, standalone's), and
// its PrometheusRule lands beside them. (deploy/monitoring's tests check
// that the rule holds alerts.yaml.)
func TestMonitoringComponent(t *testing.T) {
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			// A kustomization of one's own, as an operator writes it.
			dir, err := os.MkdirTemp(".", "monitoring-test-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			k := "resources:\n  - ../" + overlay + "\ncomponents:\n  - ../components/monitoring\n"
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
				t.Fatal(err)
			}
			objs := render(t, dir)
			sm := find(objs, "ServiceMonitor", "fleetlift")
			rule := find(objs, "PrometheusRule", "fleetlift")
			if sm == nil || rule == nil {
				t.Fatalf("ServiceMonitor %v, PrometheusRule %v; want both", sm != nil, rule != nil)
			}
			if sm.GetNamespace() != "fleetlift-system" || rule.GetNamespace() != "fleetlift-system" {
				t.Errorf("in namespaces %s and %s, want fleetlift-system", sm.GetNamespace(), rule.GetNamespace())
			}
			match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
			selector := labels.SelectorFromSet(match)
			var ports []string
			endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			for _, e := range endpoints {
				ports = append(ports, e.(map[string]any)["port"].(string))
			}
			scraped := 0
			for _, o := range objs {
				if o.GetKind() != "Service" {
					continue
				}
				svcPorts, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
				for _, p := range svcPorts {
					if p.(map[string]any)["name"] != "metrics" {
						continue
					}
					if !selector.Matches(labels.Set(o.GetLabels())) || !slices.Contains(ports, "metrics") {
						t.Errorf("Service %s has a metrics port the ServiceMonitor does not scrape", o.GetName())
					}
					scraped++
				}
			}
			if scraped < 2 {
				t.Errorf("the ServiceMonitor scrapes %d Services, want the reconciler's or up's, and the controller's at least", scraped)
			}
			groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
			if len(groups) == 0 {
				t.Error("the PrometheusRule has no groups")
			}
		})
	}
}
