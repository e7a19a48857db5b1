package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/cmd/fleetlift-agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/gcpace"
	"github.com/fleetlift/fleetlift/internal/jail"
)

// version is the release this binary was built as: make dist and the
// images set it (-X main.version=v0.1.0).
var version = "dev"

func main() {
	if args, ok := agentcmd.JailArgs(os.Args[1:]); ok {
		os.Exit(jail.Main(args))
	}
	// The agent collects garbage at fleetlift's percent, as fleetlift's
	// hidden agent command does: it lives for one sandbox, and at the
	// default percent the zlib writers of its commit and its bundle
	// (650 KB each) started collections of their own. The jail keeps
	// GOGC's percent, as fleetlift's does.
	gcpace.Set()
	_, _, _ = gcpace.LimitMemory()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "fleetlift-agent",
		Short:         "The fleetlift agent that runs inside a sandbox",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetVersionTemplate("fleetlift-agent {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(agentcmd.NewServeCommand(), agentcmd.NewJailCommand(), agentcmd.NewEntrypointCommand())
	root.AddCommand(agentcmd.NewShimCommands()...)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		// The shim's commands have said what went wrong; their exit
		// codes pass through.
		code, ok := agentcmd.ShimExit(err)
		if !ok {
			fmt.Fprintln(stderr, "fleetlift-agent:", err)
		}
		return code
	}
	return 0
}
