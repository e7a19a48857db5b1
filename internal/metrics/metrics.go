package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/webhook"
)

// Namespace starts every series fleetlift itself exports.
const Namespace = "fleetlift"

// Metrics holds one process's series and the registry they are
// exported from. Make it with New; its methods are safe for concurrent
// use.
type Metrics struct {
	reg *prometheus.Registry

	passDuration prometheus.Histogram
	passErrors   *prometheus.CounterVec
	reconciler   *reconcilerCollector
	webhooks     *prometheus.CounterVec
	provision    *prometheus.HistogramVec
	forgeReqs    *prometheus.CounterVec
	rateWaits    *prometheus.CounterVec
	rateWaitSecs *prometheus.CounterVec
	notify       *prometheus.CounterVec
	permits      *prometheus.CounterVec
	permitWait   *prometheus.CounterVec
	reqPermits   *prometheus.CounterVec
	reqWait      *prometheus.CounterVec
	slots        *prometheus.CounterVec
	slotWait     *prometheus.CounterVec
	agentTokens  *prometheus.CounterVec
	cost         *prometheus.CounterVec
	runs         *runCollector
}

// New makes the series and registers them, with the Go runtime's and the
// process's, in a registry of their own.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "reconcile", Name: "pass_duration_seconds",
			Help:    "How long reconcile passes took: read the campaigns repository and the recorded state, plan, carry out.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}),
		passErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "reconcile", Name: "errors_total",
			Help: "Reconcile errors: stage=pass for a pass that could not plan or was refused, stage=apply for an action of a pass that failed.",
		}, []string{"stage"}),
		reconciler: &reconcilerCollector{},
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "webhook", Name: "deliveries_total",
			Help: "Webhook requests by outcome: accepted, ignored, duplicate, unauthorized, refused.",
		}, []string{"outcome"}),
		provision: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "sandbox", Name: "provision_duration_seconds",
			Help:    "How long provisioning a sandbox took, until its agent was started, by provider and outcome (ok, error).",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"provider", "outcome"}),
		forgeReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "forge", Name: "requests_total",
			Help: "HTTP requests sent to a forge's API, retries included, by forge, method and status code (0: no response).",
		}, []string{"forge", "method", "code"}),
		rateWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "forge", Name: "rate_limit_waits_total",
			Help: "Times requests to a forge were held back for a rate limit it reported.",
		}, []string{"forge"}),
		rateWaitSecs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "forge", Name: "rate_limit_wait_seconds_total",
			Help: "Time requests to a forge were held back for rate limits it reported.",
		}, []string{"forge"}),
		notify: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "notify", Name: "deliveries_total",
			Help: "Tries to deliver a notification message, by service, event and outcome: delivered, retry (tried again later), failed (given up).",
		}, []string{"service", "event", "outcome"}),
		permits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "forge", Name: "write_permits_total",
			Help: "Writes (content-creating requests) this process sent with a permit of the forge account's shared write budget.",
		}, []string{"forge"}),
		permitWait: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "forge", Name: "write_permit_wait_seconds_total",
			Help: "Time this process's writes waited for their permits of the forge account's shared write budget.",
		}, []string{"forge"}),
		reqPermits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "forge", Name: "request_permits_total",
			Help: "Requests (reads and writes) this process sent with a permit of the forge account's shared budget of requests (--forge-requests-per-hour).",
		}, []string{"forge"}),
		reqWait: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "forge", Name: "request_permit_wait_seconds_total",
			Help: "Time this process's requests waited for their permits of the forge account's shared budget of requests.",
		}, []string{"forge"}),
		slots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "forge", Name: "transfer_slots_total",
			Help: "Git transfers (clones, fetches, pushes) this process ran in a slot of the forge account's shared transfer slots (--forge-parallel-clones).",
		}, []string{"forge"}),
		slotWait: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "forge", Name: "transfer_slot_wait_seconds_total",
			Help: "Time this process's git transfers waited for their slots of the forge account's shared transfer slots.",
		}, []string{"forge"}),
		agentTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "agent", Name: "tokens_total",
			Help: "Model tokens the agents' calls through this worker's gateway used, as the model reported them, by campaign (or task), team (the definition's team), model and kind: input, output, cache_write, cache_read.",
		}, []string{"campaign", "team", "model", "kind"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "cost_usd_total",
			Help: "What the agents' model calls through this worker's gateway cost, in US dollars at the operator's price table, by campaign (or task), team and model. Calls to models the table has no price for count tokens only.",
		}, []string{"campaign", "team", "model"}),
		runs: &runCollector{now: time.Now},
	}
	m.passErrors.WithLabelValues("pass")
	m.passErrors.WithLabelValues("apply")
	for _, o := range []webhook.Outcome{webhook.OutcomeAccepted, webhook.OutcomeIgnored, webhook.OutcomeDuplicate, webhook.OutcomeUnauthorized, webhook.OutcomeRefused} {
		m.webhooks.WithLabelValues(o.String())
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.passDuration, m.passErrors, m.reconciler, m.webhooks, m.provision,
		m.forgeReqs, m.rateWaits, m.rateWaitSecs, m.notify, m.permits, m.permitWait, m.reqPermits, m.reqWait, m.slots, m.slotWait, m.agentTokens, m.cost, m.runs,
	)
	return m
}

// Registry is where the series are registered; the Temporal SDK's go
// there too (see TemporalHandler).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Reconciling says that this process runs a reconciler, and leading
// whether it is the replica that reconciles now (with --leader-elect, the
// one holding the lease; otherwise always). From then on
// fleetlift_reconcile_leader says 1 while leading is true and 0 while it
// is not: a standby. A process that never calls it (a worker) exports no
// such series. Call it once, before the reconciler runs.
func (m *Metrics) Reconciling(leading func() bool) {
	m.reconciler.mu.Lock()
	defer m.reconciler.mu.Unlock()
	m.reconciler.leading = leading
}

var _ reconcile.Observer = (*Metrics)(nil)

// ObservePass records a reconcile pass: its duration, its errors, the
// time of the last one that succeeded, and the recorded state it read,
// which the run series show until the next pass.
func (m *Metrics) ObservePass(res *reconcile.Result, err error, took time.Duration) {
	m.passDuration.Observe(took.Seconds())
	if err != nil {
		m.passErrors.WithLabelValues("pass").Inc()
		return
	}
	failed := len(res.Failed())
	m.passErrors.WithLabelValues("apply").Add(float64(failed))
	if failed == 0 {
		m.reconciler.succeeded(time.Now())
	}
	m.runs.set(res.Recorded)
}

// WebhookDelivered counts one webhook request (webhook.Options.Delivered).
func (m *Metrics) WebhookDelivered(o webhook.Outcome) {
	m.webhooks.WithLabelValues(o.String()).Inc()
}

// ForgeTransport counts the requests next sends to the forge named
// forge. Only the method and the status code are recorded: never a URL
// or a header, which may hold a token.
func (m *Metrics) ForgeTransport(forge string, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		code := "0"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		m.forgeReqs.WithLabelValues(forge, req.Method, code).Inc()
		return resp, err
	})
}

// RateLimitWait records a wait for a rate limit of the forge named forge
// (github.BudgetOptions.OnRateLimitWait).
func (m *Metrics) RateLimitWait(forge string) func(time.Duration) {
	return func(d time.Duration) {
		m.rateWaits.WithLabelValues(forge).Inc()
		m.rateWaitSecs.WithLabelValues(forge).Add(d.Seconds())
	}
}

// PermitWaited records a write's wait for its permit of the shared
// write budget of the forge named forge (dispatch.ForgeBudget.OnWait).
func (m *Metrics) PermitWaited(forge string) func(time.Duration) {
	return waited(m.permits, m.permitWait, forge)
}

// RequestPermitWaited records a request's wait for its permit of the
// shared budget of requests of the forge named forge.
func (m *Metrics) RequestPermitWaited(forge string) func(time.Duration) {
	return waited(m.reqPermits, m.reqWait, forge)
}

// SlotWaited records a git transfer's wait for its slot of the shared
// transfer slots of the forge named forge (dispatch.ForgeSlots.OnWait).
func (m *Metrics) SlotWaited(forge string) func(time.Duration) {
	return waited(m.slots, m.slotWait, forge)
}

// waited counts one wait in count and its length in seconds.
func waited(count, seconds *prometheus.CounterVec, forge string) func(time.Duration) {
	return func(d time.Duration) {
		count.WithLabelValues(forge).Inc()
		seconds.WithLabelValues(forge).Add(d.Seconds())
	}
}

// NotifyTried counts one try to deliver a notification message
// (activity.Activities.NotifyTried): outcome is delivered, retry or
// failed.
func (m *Metrics) NotifyTried(service, event, outcome string) {
	m.notify.WithLabelValues(service, event, outcome).Inc()
}

// ModelUsed counts what one model call of a sandbox of campaign (or
// task) and team used and cost (gateway.Gateway.Observe).
func (m *Metrics) ModelUsed(campaign, team, model string, u protocol.ModelUsage) {
	for kind, n := range map[string]int64{"input": u.InputTokens, "output": u.OutputTokens,
		"cache_write": u.CacheCreationInputTokens, "cache_read": u.CacheReadInputTokens} {
		if n > 0 {
			m.agentTokens.WithLabelValues(campaign, team, model, kind).Add(float64(n))
		}
	}
	if u.CostUSD > 0 {
		m.cost.WithLabelValues(campaign, team, model).Add(u.CostUSD)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Sandbox returns p with the duration of each Provision recorded. What
// else p offers its callers (Watch: a sandbox that says when its files
// change) it still offers.
func (m *Metrics) Sandbox(p sandbox.Provider) sandbox.Provider {
	t := &timedProvider{Provider: p, m: m}
	if w, ok := p.(watcher); ok {
		return &watchedProvider{timedProvider: t, w: w}
	}
	return t
}

// watcher is a provider that says when a sandbox's file changes, as the
// local and Docker providers do.
type watcher interface {
	Watch(id, path string) (changed <-chan struct{}, stop func() error, err error)
}

type watchedProvider struct {
	*timedProvider
	w watcher
}

func (p *watchedProvider) Watch(id, path string) (<-chan struct{}, func() error, error) {
	return p.w.Watch(id, path)
}

type timedProvider struct {
	sandbox.Provider
	m *Metrics
}

var _ sandbox.Provider = (*timedProvider)(nil)

func (t *timedProvider) Provision(ctx context.Context, opts sandbox.ProvisionOptions) (*sandbox.Sandbox, error) {
	start := time.Now()
	sb, err := t.Provider.Provision(ctx, opts)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	t.m.provision.WithLabelValues(t.Name(), outcome).Observe(time.Since(start).Seconds())
	return sb, err
}

// reconcilerCollector exports whether this process leads and when its
// last successful pass ended. Neither series is there until it means
// something: a worker says nothing about leading, and a replica that has
// not yet completed a pass (a standby) has no last success, rather than
// one at 1970 that an alert on its age would take for a stall.
type reconcilerCollector struct {
	mu          sync.Mutex
	leading     func() bool
	lastSuccess time.Time
}

var (
	descLeader = prometheus.NewDesc(Namespace+"_reconcile_leader",
		"1 while this reconciler is the replica that reconciles (it holds the lease, or runs without --leader-elect), 0 while it stands by.", nil, nil)
	descLastSuccess = prometheus.NewDesc(Namespace+"_reconcile_last_success_timestamp_seconds",
		"When the last pass that planned and carried out every action ended, as a Unix time; absent until one has.", nil, nil)
)

func (c *reconcilerCollector) succeeded(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastSuccess = at
}

func (c *reconcilerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLeader
	ch <- descLastSuccess
}

func (c *reconcilerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	leading, last := c.leading, c.lastSuccess
	c.mu.Unlock()
	if leading != nil {
		v := 0.0
		if leading() {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, v)
	}
	if !last.IsZero() {
		ch <- prometheus.MustNewConstMetric(descLastSuccess, prometheus.GaugeValue, float64(last.UnixNano())/1e9)
	}
}

// runCollector exports the recorded state the last pass read, the way
// Argo CD exports its applications: one info series per run, and counts
// by state. Ages are computed when scraped.
type runCollector struct {
	now func() time.Time

	mu   sync.Mutex
	runs []state.Campaign
}

var (
	descInfo = prometheus.NewDesc(Namespace+"_campaign_info",
		"One series per recorded Task or Campaign run, with its kind and phase.", []string{"id", "kind", "phase"}, nil)
	descRepos = prometheus.NewDesc(Namespace+"_campaign_repositories",
		"Repositories of a run by state: pending, running, awaiting_approval, completed, failed, skipped, cancelled.", []string{"id", "state"}, nil)
	descPulls = prometheus.NewDesc(Namespace+"_campaign_pull_requests",
		"Pull requests of a run by state: open, merged, closed.", []string{"id", "state"}, nil)
	descDone = prometheus.NewDesc(Namespace+"_campaign_done",
		"Repositories of a run whose pull request merged, by what the definition's done_when last said on the default branch: done, not_done, regressed (only for runs with done_when).", []string{"id", "state"}, nil)
	descWaiting = prometheus.NewDesc(Namespace+"_campaign_approvals_waiting",
		"Results of a run waiting for an approval.", []string{"id"}, nil)
	descAge = prometheus.NewDesc(Namespace+"_approval_waiting_seconds",
		"How long each result has waited for an approval, by run and target (the task, or the campaign's repository or group).", []string{"id", "target"}, nil)
)

func (c *runCollector) set(runs []state.Campaign) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs = runs
}

func (c *runCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInfo, descRepos, descPulls, descDone, descWaiting, descAge} {
		ch <- d
	}
}

func (c *runCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	runs := c.runs
	c.mu.Unlock()
	now := c.now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, r := range runs {
		gauge(descInfo, 1, r.ID, r.Kind.String(), r.Phase.String())
		repos := map[state.RepoStatus]int{}
		pulls := map[state.PullRequestState]int{}
		done := map[string]int{}
		for _, repo := range r.Repos {
			repos[repo.Status]++
			if repo.PullRequestState != "" {
				pulls[repo.PullRequestState]++
			}
			if repo.PullRequestState == state.PullRequestMerged && repo.PullRequest != nil && repo.PullRequest.Done != "" {
				done[repo.PullRequest.Done]++
			}
		}
		if len(done) > 0 {
			for _, s := range state.DoneStates {
				gauge(descDone, float64(done[s]), r.ID, s)
			}
		}
		for _, s := range []state.RepoStatus{state.RepoPending, state.RepoRunning, state.RepoAwaitingApproval,
			state.RepoCompleted, state.RepoFailed, state.RepoSkipped, state.RepoCancelled} {
			gauge(descRepos, float64(repos[s]), r.ID, s.String())
		}
		for _, s := range []state.PullRequestState{state.PullRequestOpen, state.PullRequestMerged, state.PullRequestClosed} {
			gauge(descPulls, float64(pulls[s]), r.ID, s.String())
		}
		gauge(descWaiting, float64(len(r.PendingApprovals)), r.ID)
		for _, p := range r.PendingApprovals {
			if !p.Since.IsZero() {
				gauge(descAge, max(0, now.Sub(p.Since).Seconds()), r.ID, p.Target)
			}
		}
	}
}
