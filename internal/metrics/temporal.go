package metrics

import (
	"io"
	"time"

	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// TemporalHandler returns a metrics handler for the Temporal SDK's client
// and workers (client.Options.MetricsHandler) whose series, named
// temporal_*, are exported with fleetlift's: requests and their latency,
// task queue polls, workflow and activity task execution, schedule to
// start latency, sticky cache. Close the Closer when the client is
// closed: it stops reporting.
func (m *Metrics) TemporalHandler() (client.MetricsHandler, io.Closer) {
	// NewReporter, not Configuration.NewReporter: that one also
	// registers a handler on http.DefaultServeMux, which a second
	// Metrics in the process (a restarted command, a test) panics on.
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       m.reg,
		Gatherer:         m.reg,
		DefaultTimerType: tallyprom.HistogramTimerType,
		OnRegisterError:  func(error) {},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)), closer
}
