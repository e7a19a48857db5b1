package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/devserver"
)

func newServerCmd() *cobra.Command {
	var f temporalFlags
	var logLevel string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the embedded Temporal server (SQLite in --state-dir) until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, portS, err := net.SplitHostPort(f.address)
			if err != nil {
				return fmt.Errorf("--temporal-address %q: %w", f.address, err)
			}
			port, err := strconv.Atoi(portS)
			if err != nil {
				return fmt.Errorf("--temporal-address %q: bad port", f.address)
			}
			db := filepath.Join(f.stateDir, "temporal.db")
			srv, err := devserver.Start(devserver.Options{DatabaseFile: db, IP: host, Port: port, LogLevel: logLevel})
			if err != nil {
				return err
			}
			defer srv.Stop()
			fmt.Fprintf(cmd.OutOrStdout(), "Temporal listening on %s (namespace %s, database %s)\n", srv.Address(), devserver.Namespace, db)
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			select {
			case <-sig:
			case <-cmd.Context().Done():
			}
			fmt.Fprintln(cmd.OutOrStdout(), "stopping")
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "server log level: debug, info, warn, error")
	return cmd
}
