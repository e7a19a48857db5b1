// Package monitoring checks the alert rules and the dashboard with
// Prometheus's own tools: the rule parser (what promtool check rules
// runs), promtool test rules on alerts_test.yaml, and the PromQL parser.
// It is a module of its own so that fleetlift's does not depend on
// Prometheus.
package monitoring

import (
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func TestAlertRulesParse(t *testing.T) {
	groups, errs := rulefmt.ParseFile("alerts.yaml", false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" || r.Annotations["summary"] == "" {
				t.Errorf("group %s: a rule without an alert name or summary: %+v", g.Name, r)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d rules", n)
	}
}

func TestDashboardQueriesParse(t *testing.T) {
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	p := parser.NewParser(parser.Options{})
	for _, panel := range d.Panels {
		for _, tg := range panel.Targets {
			if _, err := p.ParseExpr(tg.Expr); err != nil {
				t.Errorf("panel %q: %s: %v", panel.Title, tg.Expr, err)
			}
		}
	}
}

// TestAlertRules runs promtool test rules on alerts_test.yaml, with the
// promtool of the Prometheus release go.mod pins (go tool promtool; the
// first build takes minutes, then it is cached), and checks that each
// alert fires in at least one case there.
func TestAlertRules(t *testing.T) {
	out, err := exec.Command("go", "tool", "promtool", "test", "rules", "alerts_test.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules alerts_test.yaml: %v\n%s", err, out)
	}
	var tests struct {
		Tests []struct {
			Name  string `yaml:"name"`
			Cases []struct {
				Alert  string `yaml:"alertname"`
				Alerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, "alerts_test.yaml", &tests)
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, c := range tc.Cases {
			if len(c.Alerts) > 0 {
				fires[c.Alert] = true
			}
		}
	}
	for _, name := range alertNames(t) {
		if !fires[name] {
			t.Errorf("no case of alerts_test.yaml has %s fire", name)
		}
	}
}

// runbookURL is where every alert's runbook_url points, followed by the
// anchor of the alert's section.
const runbookURL = "https://github.com/fleetlift/fleetlift/blob/main/docs/runbooks.md#"

// TestAlertRunbooks: every alert links its own section of
// docs/runbooks.md, and every section there is an alert's.
func TestAlertRunbooks(t *testing.T) {
	b, err := os.ReadFile("../../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	// GitHub's anchors: the heading's text, lowercase, spaces as -.
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^###? (.+)$`).FindAllStringSubmatch(string(b), -1) {
		anchors[strings.ReplaceAll(strings.ToLower(m[1]), " ", "-")] = true
	}
	var groups struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "alerts.yaml", &groups)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			u := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(u, runbookURL)
			switch {
			case !ok:
				t.Errorf("%s: runbook_url %q, want %s<anchor>", r.Alert, u, runbookURL)
			case anchor != strings.ToLower(r.Alert):
				t.Errorf("%s: runbook_url names section %q, not its own", r.Alert, anchor)
			case !anchors[anchor]:
				t.Errorf("%s: docs/runbooks.md has no section %s", r.Alert, r.Alert)
			}
		}
	}
	for _, name := range alertNames(t) {
		delete(anchors, strings.ToLower(name))
	}
	for _, section := range []string{"targets", "reconciler", "campaigns", "controller", "workers"} {
		delete(anchors, section)
	}
	for a := range anchors {
		t.Errorf("docs/runbooks.md has a section %q that no alert links", a)
	}
}

var update = flag.Bool("update", false, "rewrite the PrometheusRule of deploy/components/monitoring from alerts.yaml")

const prometheusRulePath = "../components/monitoring/prometheusrule.yaml"

// TestPrometheusRuleIsAlerts: the PrometheusRule that
// deploy/components/monitoring applies holds alerts.yaml's groups as they
// are. go test -update rewrites it.
func TestPrometheusRuleIsAlerts(t *testing.T) {
	src, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		body := src[strings.Index(string(src), "groups:"):]
		var b strings.Builder
		b.WriteString(`# Generated from deploy/monitoring/alerts.yaml by
# (cd deploy/monitoring && go test -run TestPrometheusRuleIsAlerts -update):
# edit alerts.yaml, not this file.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: fleetlift
  namespace: fleetlift-system
  labels:
    app.kubernetes.io/name: fleetlift
spec:
`)
		for _, line := range strings.SplitAfter(string(body), "\n") {
			if strings.TrimSpace(line) != "" {
				b.WriteString("  ")
			}
			b.WriteString(line)
		}
		if err := os.WriteFile(prometheusRulePath, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var alerts, rule struct {
		Kind   string `yaml:"kind"`
		Groups any    `yaml:"groups"`
		Spec   struct {
			Groups any `yaml:"groups"`
		} `yaml:"spec"`
	}
	readYAML(t, "alerts.yaml", &alerts)
	readYAML(t, prometheusRulePath, &rule)
	if rule.Kind != "PrometheusRule" || !reflect.DeepEqual(alerts.Groups, rule.Spec.Groups) {
		t.Errorf("%s (kind %q) differs from alerts.yaml: run go test -run TestPrometheusRuleIsAlerts -update here", prometheusRulePath, rule.Kind)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func alertNames(t *testing.T) []string {
	t.Helper()
	groups, errs := rulefmt.ParseFile("alerts.yaml", false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var out []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Alert)
		}
	}
	return out
}
