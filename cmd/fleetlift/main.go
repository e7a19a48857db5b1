package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/cmd/fleetlift-agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/gcpace"
	"github.com/fleetlift/fleetlift/internal/jail"
	"github.com/fleetlift/fleetlift/internal/logging"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/visible"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

func main() {
	// fleetlift's hidden agent command jails the commands it runs in this
	// executable (see package jail), and fleetlift serves as its own
	// sandboxed spec evaluator (see spec.Pool): both at the GC percent
	// the program started with (GOGC's); fleetlift's commands at
	// gcpace's.
	if args, ok := agentcmd.JailArgs(os.Args[1:], "agent"); ok {
		os.Exit(jail.Main(args))
	}
	if spec.IsWorker() {
		os.Exit(spec.RunWorker())
	}
	gcpace.Set()
	memory.limit, memory.limited, memory.err = gcpace.LimitMemory()
	workflow.IdentifyBinary()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// memory is what main's gcpace.LimitMemory said, logged at debug level
// once the logger is made.
var memory struct {
	limit   int64
	limited bool
	err     error
}

func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run under ctx: a command stops, as on an interrupt, when
// ctx ends.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	p := processLogOf(cmd.Context())
	if p != nil && p.lines != nil {
		p.lines.Flush()
	}
	if err == nil {
		return exitOK
	}
	code := exitCode(err, args)
	if errors.As(err, new(exitError)) {
		return code
	}
	// Errors quote definitions, runs and forges.
	msg := visible.String(err.Error())
	if p == nil && jsonLogRequested(root, args) {
		p = &processLog{json: true}
		p.log, _ = logging.New(stderr, logging.JSON, slog.LevelInfo)
	}
	if p != nil && p.json {
		p.log.Error(msg, "exit_status", code)
	} else {
		fmt.Fprintln(stderr, "fleetlift:", msg)
	}
	return code
}

// jsonLogRequested reports whether --log-format (or its variable) asks
// for JSON, for an error met before the logger was made: args are read
// as they are, since the error may be that they do not parse.
func jsonLogRequested(root *cobra.Command, args []string) bool {
	format := os.Getenv(envName(root, "log-format"))
	if f := root.PersistentFlags().Lookup("log-format"); f.Changed {
		format = f.Value.String()
	}
	for i, a := range args {
		if a == "--" {
			break
		}
		if a == "--log-format" && i+1 < len(args) {
			format = args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--log-format="); ok {
			format = v
		}
	}
	return format == logging.JSON
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "fleetlift",
		Short:         "Run code-change campaigns across many repositories, the GitOps way",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       releaseVersion(),
	}
	// --version says what the version command says.
	b := currentBuild()
	root.SetVersionTemplate(fmt.Sprintf("fleetlift {{.Version}} (commit %s, built %s; definitions: schema version %d)\n", b.Commit, b.Date, b.SchemaVersion))
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newValidateCmd(),
		newMigrateCmd(),
		newPlanCmd(),
		newRunCmd(),
		newUpCmd(),
		newReconcileCmd(),
		newDemoCmd(),
		newStatusCmd(),
		newPRsCmd(),
		newReportsCmd(),
		newServerCmd(),
		newWorkerCmd(),
		newTaskSignalCmd("approve", "Approve the results a task (or each task of a campaign) awaits approval for", workflow.SignalApprove),
		newTaskSignalCmd("reject", "Reject the results awaiting approval: no pull requests are opened", workflow.SignalReject),
		newTaskSignalCmd("steer", "Send the agent feedback and have it try again", workflow.SignalSteer),
		newCampaignSignalCmd("continue", "Resume a campaign paused at its failure threshold or cost budget", workflow.SignalContinue),
		newCampaignSignalCmd("abort", "Stop a campaign: no more repositories start", workflow.SignalAbort),
		newRetryCmd(),
		newVersionCmd(),
		newSchemaCmd(),
		agentcmd.NewAgentCommand(),
	)
	documentCommands(root)
	registerLogging(root, stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	usageArgs(root)
	registerCompletions(root)
	bindEnv(root)
	return root
}
