package controller

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
)

// metrics are fleetlift's own series, beside controller-runtime's
// controller_runtime_* ones on the same registry.
type metrics struct {
	execDuration *prometheus.HistogramVec
	refusals     *prometheus.CounterVec
	provisioning prometheus.Histogram
	phases       *phaseCollector
}

// refusalRules are the rules Policy.Check names in Refusal.Kinds.
var refusalRules = []string{"image", "runtime-class", "memory", "cpu", "secret", "env", "node-selector"}

func newMetrics(reader client.Reader) *metrics {
	m := &metrics{
		execDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fleetlift_sandbox_exec_duration_seconds",
			Help:    "How long exec requests took in the sandbox, by outcome (exited: the command ran to an exit code; error: it could not run or finish).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetlift_sandbox_policy_refusals_total",
			Help: "SandboxRequests the policy refused, by the rule broken (image, runtime-class, memory, cpu, secret, env).",
		}, []string{"rule"}),
		provisioning: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fleetlift_sandbox_provisioning_seconds",
			Help:    "From a SandboxRequest's creation to its pod running.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 12),
		}),
		phases: &phaseCollector{reader: reader, desc: prometheus.NewDesc(
			"fleetlift_sandboxrequests", "SandboxRequests by phase.", []string{"phase"}, nil)},
	}
	// Every label value known from the start, at 0: a dashboard shows
	// the series before the first exec or refusal, and an alert on their
	// increase sees the first one.
	for _, o := range []string{"exited", "error"} {
		m.execDuration.WithLabelValues(o)
	}
	for _, r := range refusalRules {
		m.refusals.WithLabelValues(r)
	}
	return m
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.execDuration, m.refusals, m.provisioning, m.phases} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// phaseCollector counts SandboxRequests by phase when scraped, from the
// manager's cache: nothing to keep in step.
type phaseCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list v1alpha1.SandboxRequestList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	counts := map[v1alpha1.Phase]int{}
	for _, p := range []v1alpha1.Phase{v1alpha1.PhasePending, v1alpha1.PhaseProvisioning, v1alpha1.PhaseRunning, v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed} {
		counts[p] = 0
	}
	for _, s := range list.Items {
		p := s.Status.Phase
		if p == "" {
			p = v1alpha1.PhasePending
		}
		counts[p]++
	}
	for p, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(p))
	}
}
