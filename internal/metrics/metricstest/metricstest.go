// Package metricstest scrapes a /metrics endpoint in tests and looks up
// series by name and labels.
package metricstest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Samples are the series of one scrape, keyed by name and sorted labels:
// `fleetlift_campaign_info{id="a",kind="Task",phase="completed"}`.
// A counter, gauge or untyped series gives its value; a histogram gives
// name_count and name_sum.
type Samples map[string]float64

// Key is the key of the series name with labels, given as name, value
// pairs in any order.
func Key(name string, labels ...string) string {
	if len(labels) == 0 {
		return name
	}
	var parts []string
	for i := 0; i+1 < len(labels); i += 2 {
		parts = append(parts, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// Get returns the value of a series and whether it was there.
func (s Samples) Get(name string, labels ...string) (float64, bool) {
	v, ok := s[Key(name, labels...)]
	return v, ok
}

// Names returns the names of the series whose name starts with prefix.
func (s Samples) Names(prefix string) []string {
	seen := map[string]bool{}
	for k := range s {
		name, _, _ := strings.Cut(k, "{")
		if strings.HasPrefix(name, prefix) {
			seen[name] = true
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Scrape GETs url and parses Prometheus's text format.
func Scrape(t testing.TB, url string) Samples {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s: %s: %s", url, resp.Status, b)
	}
	s, err := Parse(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return s
}

// Parse reads Prometheus's text format.
func Parse(r io.Reader) (Samples, error) {
	// Names as Prometheus 3 accepts them (a zero TextParser validates
	// with no scheme and panics).
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := Samples{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName(), l.GetValue())
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[Key(name, labels...)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[Key(name, labels...)] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[Key(name+"_count", labels...)] = float64(m.GetHistogram().GetSampleCount())
				out[Key(name+"_sum", labels...)] = m.GetHistogram().GetSampleSum()
			case dto.MetricType_SUMMARY:
				out[Key(name+"_count", labels...)] = float64(m.GetSummary().GetSampleCount())
				out[Key(name+"_sum", labels...)] = m.GetSummary().GetSampleSum()
			default:
				out[Key(name, labels...)] = m.GetUntyped().GetValue()
			}
		}
	}
	return out, nil
}

// Has reports whether the scrape has a series named name, taking
// name_bucket, name_count and name_sum for the histogram name.
func (s Samples) Has(name string) bool {
	for _, n := range []string{name, strings.TrimSuffix(name, "_bucket") + "_count"} {
		for k := range s {
			if k == n || strings.HasPrefix(k, n+"{") {
				return true
			}
		}
	}
	return false
}

// queriedName matches the series names deploy/monitoring queries: those
// of fleetlift's processes (fleetlift_, the Temporal SDK's temporal_)
// and of the controller's controller-runtime (controller_runtime_,
// workqueue_, leader_election_).
var queriedName = regexp.MustCompile(`\b(?:fleetlift|temporal|controller_runtime|workqueue|leader_election)_[a-z0-9_]+`)

// Queried returns the names of the series that deploy/monitoring's alert
// rules (alerts.yaml) and dashboard (dashboard.json) query, of the
// repository the test runs in, each once, for which keep is true.
func Queried(t testing.TB, keep func(name string) bool) []string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "deploy", "monitoring", "alerts.yaml")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no deploy/monitoring/alerts.yaml above the test's directory")
		}
		dir = parent
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range []string{"alerts.yaml", "dashboard.json"} {
		b, err := os.ReadFile(filepath.Join(dir, "deploy", "monitoring", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range queriedName.FindAllString(string(b), -1) {
			if !seen[n] && keep(n) {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Controller reports whether the series named name is one
// fleetlift-controller exports (its own and controller-runtime's), not
// one of fleetlift's reconcilers and workers.
func Controller(name string) bool {
	for _, p := range []string{"controller_runtime_", "workqueue_", "leader_election_", "fleetlift_sandboxrequests",
		"fleetlift_sandbox_exec_", "fleetlift_sandbox_policy_", "fleetlift_sandbox_provisioning_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
