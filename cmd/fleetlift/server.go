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
	"github.com/fleetlift/fleetlift/internal/devserver/credential"
	"github.com/fleetlift/fleetlift/internal/listen"
)

func newServerCmd() *cobra.Command {
	var f temporalFlags
	var ui string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the embedded Temporal server (SQLite in --state-dir) until interrupted",
		Long: `Server runs the embedded Temporal server until interrupted, persisting to
--state-dir/temporal.db. Every port it opens requires a client certificate
from the install's own authority, made in --state-dir/tls on the first
start and reused after: fleetlift commands run with the same --state-dir
present it; a worker on another machine needs copies of tls/client.pem,
tls/client-key.pem and tls/ca.pem (--temporal-tls-cert, -key, -ca). Keep
tls/ private: whoever holds its files can start, signal and read every run.

The first start makes the database whole or not at all, so a first start
killed midway leaves nothing the next one trips on. One server at a time
uses a --state-dir: a second is refused while the first runs. A server
that starts but cannot serve exits with its error.

It runs Temporal's frontend, history and matching services, not its system
worker: a schedule or batch operation made with Temporal's CLI is accepted
and never runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, portS, err := net.SplitHostPort(f.address)
			if err != nil {
				return fmt.Errorf("--temporal-address %q: %w", f.address, err)
			}
			port, err := strconv.Atoi(portS)
			if err != nil {
				return fmt.Errorf("--temporal-address %q: bad port", f.address)
			}
			db, creds := filepath.Join(f.stateDir, "temporal.db"), credentialDir(f.stateDir)
			level, logJSON := serverLog(cmd.Context(), "warn")
			srv, err := devserver.Start(devserver.Options{DatabaseFile: db, TLSDir: creds, IP: host, Port: port, LogLevel: level, LogJSON: logJSON})
			if err != nil {
				return listen.Explain("temporal-address", f.address, err)
			}
			defer srv.Stop()
			fmt.Fprintf(cmd.OutOrStdout(), "Temporal listening on %s (namespace %s, database %s)\n", srv.Address(), devserver.Namespace, db)
			fmt.Fprintf(cmd.OutOrStdout(), "clients must present the install's certificate: commands with --state-dir %s use it; elsewhere pass --temporal-tls-cert %s --temporal-tls-key %s --temporal-tls-ca %s\n",
				f.stateDir, filepath.Join(creds, credential.ClientCertFile), filepath.Join(creds, credential.ClientKeyFile), filepath.Join(creds, credential.CAFile))
			if ui != "" {
				stopUI, err := serveUI(cmd, ui, &f)
				if err != nil {
					return err
				}
				defer stopUI()
			}
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
	registerUI(cmd, &ui)
	return cmd
}
