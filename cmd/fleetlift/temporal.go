package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"

	"github.com/fleetlift/fleetlift/internal/devserver"
)

// DefaultAddress is where fleetlift looks for Temporal, and where the
// embedded server listens.
const defaultAddress = "127.0.0.1:7233"

// temporalFlags are the connection flags every command that talks to
// Temporal has.
type temporalFlags struct {
	address   string
	namespace string
	stateDir  string
}

func (f *temporalFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.address, "temporal-address", envOr("FLEETLIFT_TEMPORAL_ADDRESS", defaultAddress), "Temporal frontend host:port")
	cmd.Flags().StringVar(&f.namespace, "namespace", envOr("FLEETLIFT_NAMESPACE", devserver.Namespace), "Temporal namespace")
	cmd.Flags().StringVar(&f.stateDir, "state-dir", defaultStateDir(), "where the embedded server's database and local sandboxes live")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// defaultStateDir is $XDG_STATE_HOME/fleetlift or ~/.local/state/fleetlift.
func defaultStateDir() string {
	if d := os.Getenv("FLEETLIFT_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "fleetlift")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "fleetlift")
	}
	return filepath.Join(os.TempDir(), "fleetlift")
}

// dial connects to Temporal.
func (f *temporalFlags) dial(ctx context.Context) (client.Client, error) {
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  f.address,
		Namespace: f.namespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w (start one with `fleetlift server`, or pass --temporal-address)", f.address, err)
	}
	return c, nil
}

// dialRun connects to Temporal and resolves a run id given by the user
// (see resolveID). The caller closes the client.
func (f *temporalFlags) dialRun(ctx context.Context, arg string) (client.Client, string, error) {
	c, err := f.dial(ctx)
	if err != nil {
		return nil, "", err
	}
	id, err := resolveID(ctx, c, arg)
	if err != nil {
		c.Close()
		return nil, "", err
	}
	return c, id, nil
}

// listening reports whether something accepts connections at addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// dialOrEmbed connects to Temporal at the flags' address; when nothing
// listens there and the address is on this machine's loopback, it starts
// the embedded server there first. The returned stop function stops what was started.
func (f *temporalFlags) dialOrEmbed(ctx context.Context, logw io.Writer) (client.Client, func(), error) {
	stop := func() {}
	if !listening(f.address) {
		host, port, err := net.SplitHostPort(f.address)
		if err != nil {
			return nil, nil, fmt.Errorf("--temporal-address %q: %w", f.address, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, nil, fmt.Errorf("nothing listens at --temporal-address %s", f.address)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, nil, fmt.Errorf("--temporal-address %q: bad port", f.address)
		}
		fmt.Fprintf(logw, "starting the embedded Temporal server on %s (database %s)\n", f.address, filepath.Join(f.stateDir, "temporal.db"))
		srv, err := devserver.Start(devserver.Options{
			DatabaseFile: filepath.Join(f.stateDir, "temporal.db"),
			IP:           host, Port: p,
			LogFile: filepath.Join(f.stateDir, "temporal.log"),
		})
		if err != nil {
			return nil, nil, err
		}
		stop = srv.Stop
	}
	c, err := f.dial(ctx)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return c, func() { c.Close(); stop() }, nil
}

var errInterrupted = errors.New("interrupted")

// converterFor is the data converter fleetlift's workflows use.
func converterFor() converter.DataConverter { return converter.GetDefaultDataConverter() }
