package metrics

import (
	"fmt"
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
func (m *Metrics) TemporalHandler() (client.MetricsHandler, io.Closer, error) {
	reporter, err := tallyprom.Configuration{TimerType: "histogram"}.NewReporter(tallyprom.ConfigurationOptions{
		Registry: m.reg,
		OnError:  func(error) {},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("temporal metrics: %w", err)
	}
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)), closer, nil
}
