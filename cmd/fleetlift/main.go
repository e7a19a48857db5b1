package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/gcpace"
	"github.com/fleetlift/fleetlift/internal/jail"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/visible"
	"github.com/fleetlift/fleetlift/internal/workflow"
	"github.com/fleetlift/fleetlift/schemas"
)

// exitError carries an exit code out of a command that has already told
// the user what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	// fleetlift's hidden agent command jails the commands it runs in this
	// executable (see package jail), and fleetlift serves as its own
	// sandboxed spec evaluator (see spec.Pool): both with the GC percent
	// the program started with (GOGC's), not the commands' (package
	// gcpace), as they ran before.
	if args, ok := agentcmd.JailArgs(os.Args[1:], "agent"); ok {
		gcpace.Restore()
		os.Exit(jail.Main(args))
	}
	if spec.IsWorker() {
		gcpace.Restore()
		os.Exit(spec.RunWorker())
	}
	workflow.IdentifyBinary()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		// Errors quote definitions, runs and forges.
		fmt.Fprintln(stderr, "fleetlift:", visible.String(err.Error()))
		return 1
	}
	return 0
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
	root.SetVersionTemplate(fmt.Sprintf("fleetlift {{.Version}} (definitions: schema version %d)\n", schemas.Version))
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
		newReportsCmd(),
		newServerCmd(),
		newWorkerCmd(),
		newTaskSignalCmd("approve", "Approve the results a task (or each task of a campaign) awaits approval for", workflow.SignalApprove),
		newTaskSignalCmd("reject", "Reject the results awaiting approval: no pull requests are opened", workflow.SignalReject),
		newTaskSignalCmd("steer", "Send the agent feedback and have it try again", workflow.SignalSteer),
		newCampaignSignalCmd("continue", "Resume a campaign paused at its failure threshold", workflow.SignalContinue),
		newCampaignSignalCmd("abort", "Stop a campaign: no more repositories start", workflow.SignalAbort),
		newRetryCmd(),
		newVersionCmd(),
		newSchemaCmd(),
		agentcmd.NewAgentCommand(),
	)
	registerLogFormat(root)
	bindEnv(root)
	return root
}
