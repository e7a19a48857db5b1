package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/metrics"
	"github.com/fleetlift/fleetlift/internal/webui"
)

// defaultMetricsListen is where `fleetlift up` serves /metrics unless told
// otherwise: loopback, the port Prometheus's client libraries' examples
// use. The other commands serve none unless --metrics-listen says where.
const defaultMetricsListen = "127.0.0.1:9464"

// metricsDefault makes up's --metrics-listen default defaultMetricsListen.
func metricsDefault(cmd *cobra.Command, m *metricsFlags) {
	m.listen = defaultMetricsListen
	if f := cmd.Flags().Lookup("metrics-listen"); f != nil {
		f.DefValue = defaultMetricsListen
	}
}

// metricsFlags configure the /metrics endpoint of a long-running command.
type metricsFlags struct {
	listen string
}

func (m *metricsFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&m.listen, "metrics-listen", "",
		"address to serve Prometheus metrics on at /metrics (and /healthz), e.g. 127.0.0.1:9464 or :9464 in a pod; off when empty")
}

// observability is what a long-running command reports through: its
// logger and its metrics, which the Temporal SDK's client reports into.
type observability struct {
	log     *slog.Logger
	metrics *metrics.Metrics
	stop    func()
}

// observe makes the process's logger and metrics, serves /metrics when
// --metrics-listen says where, and has the Temporal client of f log and
// report through them. Call stop when the command ends.
func observe(cmd *cobra.Command, mf *metricsFlags, f *temporalFlags) (*observability, error) {
	log, err := processLogger(cmd)
	if err != nil {
		return nil, err
	}
	m := metrics.New()
	handler, closer := m.TemporalHandler()
	o := &observability{log: log, metrics: m, stop: func() { _ = closer.Close() }}
	f.log, f.metrics = log, handler
	if mf.listen == "" {
		return o, nil
	}
	ln, err := listen.TCP("metrics-listen", mf.listen)
	if err != nil {
		if mf.listen == defaultMetricsListen && !cmd.Flags().Changed("metrics-listen") {
			// up's default port taken, say by another install: said,
			// as for the Web UI, not fatal.
			log.Warn("no metrics endpoint: the default address is taken (set --metrics-listen to another)", "address", mf.listen, "error", err)
			return o, nil
		}
		o.stop()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	var served http.Handler = mux
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); net.ParseIP(host).IsLoopback() {
		// On loopback (up's default) only this machine reads it: a web
		// page cannot through a name of its own (DNS rebinding). On
		// another address, Prometheus names it as it found it.
		served = webui.OwnNames(ln.Addr().String(), "the metrics endpoint", mux)
	}
	srv := &http.Server{Handler: served, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("metrics listening", "address", ln.Addr().String(), "path", "/metrics")
	o.stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = closer.Close()
	}
	return o, nil
}
