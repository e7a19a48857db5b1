package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/sandbox/local"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// workerFlags configure the worker and its local sandboxes.
type workerFlags struct {
	agentCLI string
	passEnv  []string
	// extraEnv is set by the command, not a flag: what the forge needs
	// in sandboxes (see forgeSetup.sandboxEnv).
	extraEnv map[string]string
}

func (w *workerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&w.agentCLI, "agent-cli", os.Getenv("FLEETLIFT_AGENT_CLI"),
		`agent CLI for agentic tasks, as a JSON argv (default: Claude Code, "claude -p")`)
	cmd.Flags().StringSliceVar(&w.passEnv, "sandbox-env", []string{"ANTHROPIC_API_KEY", "GITHUB_TOKEN", "FLEETLIFT_FORGE_URL", "FLEETLIFT_FORGE_TOKEN", "FLEETLIFT_GIT_TOKEN"},
		"names of this process's environment variables passed into sandboxes (only when set)")
}

// sandboxEnv is the environment every sandbox gets: the agent CLI setting
// and the declared variables that are set. It stays in the worker's memory.
func (w *workerFlags) sandboxEnv() (map[string]string, error) {
	env := map[string]string{}
	if w.agentCLI != "" {
		var argv []string
		if err := json.Unmarshal([]byte(w.agentCLI), &argv); err != nil || len(argv) == 0 {
			return nil, fmt.Errorf(`--agent-cli must be a JSON array such as ["claude","-p"]`)
		}
		env["FLEETLIFT_AGENT_CLI"] = w.agentCLI
	}
	for _, name := range w.passEnv {
		if v, ok := os.LookupEnv(name); ok {
			env[name] = v
		}
	}
	for k, v := range w.extraEnv {
		env[k] = v
	}
	return env, nil
}

// newWorker registers fleetlift's workflows and activities, with local
// sandboxes under stateDir/sandboxes whose agent is this executable.
func newWorker(c client.Client, stateDir string, wf *workerFlags) (worker.Worker, error) {
	agent, err := agentCommand()
	if err != nil {
		return nil, err
	}
	provider, err := local.New(local.Options{
		Root:         filepath.Join(stateDir, "sandboxes"),
		AgentCommand: agent,
	})
	if err != nil {
		return nil, err
	}
	env, err := wf.sandboxEnv()
	if err != nil {
		return nil, err
	}
	w := worker.New(c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflow(workflow.Task)
	w.RegisterWorkflow(workflow.Campaign)
	// The lease reconciler replicas elect their leader with.
	w.RegisterWorkflow(workflow.Lease)
	// The latch the reconciler keeps watch.require_reviewed_merge in.
	w.RegisterWorkflow(workflow.Latch)
	w.RegisterActivity(&activity.Activities{Sandbox: provider, SandboxEnv: env})
	return w, nil
}

// agentCommand is the agent that local sandboxes run: $FLEETLIFT_AGENT_BINARY,
// else fleetlift-agent beside this executable, else this executable's
// hidden agent command. The slim fleetlift-agent starts in a tenth of the
// time and memory: this binary links the Temporal server.
func agentCommand() ([]string, error) {
	if p := os.Getenv("FLEETLIFT_AGENT_BINARY"); p != "" {
		return []string{p}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the agent: %w", err)
	}
	slim := filepath.Join(filepath.Dir(exe), "fleetlift-agent")
	if fi, err := os.Stat(slim); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return []string{slim}, nil
	}
	return []string{exe, "agent"}, nil
}

func newWorkerCmd() *cobra.Command {
	var f temporalFlags
	var wf workerFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker: executes Task and Campaign workflows with local sandboxes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			c, err := f.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			w, err := newWorker(c, f.stateDir, &wf)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "worker polling task queue %q on %s\n", workflow.TaskQueue, f.address)
			return w.Run(interruptCh(ctx))
		},
	}
	f.register(cmd)
	wf.register(cmd)
	return cmd
}

// interruptCh closes when ctx is done, for worker.Run.
func interruptCh(ctx context.Context) <-chan any {
	ch := make(chan any)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch
}
