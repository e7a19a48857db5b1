package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/gcpace"
)

// version is the release this binary was built as: make dist and the
// images set it (-X main.version=v0.1.0).
var version = "dev"

func main() {
	memory.limit, memory.limited, memory.err = gcpace.LimitMemory()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// memory is what main's gcpace.LimitMemory said, logged once the logger
// is made.
var memory struct {
	limit   int64
	limited bool
	err     error
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "fleetlift-controller:", err)
		return 1
	}
	return 0
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "fleetlift-controller",
		Short:         "Reconcile SandboxRequests into sandbox pods (Jobs or agent-sandbox claims), and run their exec requests",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
	}
	root.SetVersionTemplate("fleetlift-controller {{.Version}}\n")
	var o options
	o.register(root)
	root.RunE = func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.ErrOrStderr()) }
	root.AddCommand(newTemplateCmd())
	return root
}
