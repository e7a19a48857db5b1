// Package monitoring checks the alert rules and the dashboard with
// Prometheus's own rule parser (what promtool check rules runs). It is a
// module of its own so that fleetlift's does not depend on Prometheus.
package monitoring

import (
	"encoding/json"
	"log/slog"
	"os"
	"testing"

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
