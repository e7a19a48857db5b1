package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/devserver/credential"
	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/webui"
)

// registerUI adds --ui-listen. The UI is off unless asked for: whoever
// reaches its port reads every run, other teams' diffs included.
func registerUI(cmd *cobra.Command, listen *string) {
	cmd.Flags().StringVar(listen, "ui-listen", "",
		"address to serve the read-only Temporal Web UI on, such as 127.0.0.1:8233; off when empty (the default)")
}

// serveUI serves the Temporal Web UI for the Temporal server f names,
// presenting the client certificate f connects with (the install's in
// --state-dir/tls, or --temporal-tls-cert/-key/-ca). A port given with
// --ui-listen (or its variable) that cannot be had is an error; the
// default port taken, say by another install, is only said.
func serveUI(cmd *cobra.Command, listenAddr string, f *temporalFlags) (func(), error) {
	o := webui.Options{Listen: listenAddr, Temporal: f.address, Namespace: f.namespace, ServerName: f.tls.serverName}
	switch {
	case f.tls.mode == "false":
	case f.tls.cert != "" || f.tls.ca != "":
		o.CertFile, o.KeyFile, o.CAFile = f.tls.cert, f.tls.key, f.tls.ca
	default:
		dir := credentialDir(f.stateDir)
		cert := filepath.Join(dir, credential.ClientCertFile)
		if _, err := os.Stat(cert); err == nil {
			o.CertFile, o.KeyFile, o.CAFile = cert, filepath.Join(dir, credential.ClientKeyFile), filepath.Join(dir, credential.CAFile)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	srv, err := webui.Start(o)
	if err != nil {
		if cmd.Flags().Changed("ui-listen") {
			if taken := listen.Explain("ui-listen", listenAddr, err); taken != err {
				return nil, taken
			}
			return nil, fmt.Errorf("--ui-listen: %w", err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "no Temporal Web UI: %v (set --ui-listen to another address)\n", err)
		return func() {}, nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Temporal Web UI at %s\n", srv.URL())
	return srv.Stop, nil
}
