package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/controller"
	"github.com/fleetlift/fleetlift/internal/jobspec"
)

// newTemplateCmd prints what an administrator installs for the
// agent-sandbox backend to serve an image.
func newTemplateCmd() *cobra.Command {
	var (
		name, namespace, image, agentImage, isolation, memory, cpu string
		creds                                                      []string
		replicas                                                   int32
		processes                                                  int
	)
	cmd := &cobra.Command{
		Use:   "template --name NAME --image IMAGE [--credential VAR=SECRET/KEY]...",
		Short: "Print a SandboxTemplate of fleetlift's sandbox pod for IMAGE and a SandboxWarmPool serving it, for --backend agent-sandbox",
		Long: `template prints, as YAML for kubectl apply, an agent-sandbox SandboxTemplate
whose pod is the one fleetlift's Jobs run (the agent installed from the agent
image, restricted security, the exec container) with the credentials given,
which claims cannot add, and a SandboxWarmPool of --replicas ready pods of it.
Run the controller with --backend agent-sandbox --warm-pool IMAGE=NAME.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printTemplate(cmd.OutOrStdout(), name, namespace, image, agentImage, isolation, memory, cpu, creds, replicas, processes)
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "the template's and warm pool's name")
	f.StringVar(&namespace, "namespace", "sandbox-isolated", "the sandbox namespace")
	f.StringVar(&image, "image", "", "the task image")
	f.StringVar(&agentImage, "agent-image", jobspec.DefaultAgentImage, "the image the agent is installed from")
	f.StringVar(&isolation, "sandbox-isolation", protocol.IsolationNamespaces, "as the controller's flag")
	f.StringVar(&memory, "memory", "4Gi", "the sandbox container's memory limit")
	f.StringVar(&cpu, "cpu", "2", "the sandbox container's CPU limit")
	f.StringSliceVar(&creds, "credential", nil, "VAR=SECRET/KEY: a variable the agent gets from a Secret (repeatable)")
	f.Int32Var(&replicas, "replicas", 2, "how many ready pods the warm pool keeps")
	f.IntVar(&processes, "sandbox-processes", jobspec.DefaultProcesses, "as the controller's flag")
	cmd.MarkFlagRequired("name")
	cmd.MarkFlagRequired("image")
	return cmd
}

func printTemplate(w io.Writer, name, namespace, image, agentImage, isolation, memory, cpu string, creds []string, replicas int32, processes int) error {
	if processes < 1 {
		return fmt.Errorf("--sandbox-processes %d: want 1 or more", processes)
	}
	var serve []string
	switch isolation {
	case protocol.IsolationNamespaces:
	case protocol.IsolationNone:
		serve = []string{"--isolation", protocol.IsolationNone}
	default:
		return fmt.Errorf("--sandbox-isolation %q: want %s or %s", isolation, protocol.IsolationNamespaces, protocol.IsolationNone)
	}
	var credentials []v1alpha1.Credential
	for _, c := range creds {
		env, rest, ok := strings.Cut(c, "=")
		secret, key, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 || env == "" || secret == "" || key == "" {
			return fmt.Errorf("--credential %q: want VAR=SECRET/KEY", c)
		}
		credentials = append(credentials, v1alpha1.Credential{Name: secret, EnvVar: env, SecretKey: key})
	}
	mem, err := resource.ParseQuantity(memory)
	if err != nil {
		return fmt.Errorf("--memory: %w", err)
	}
	c, err := resource.ParseQuantity(cpu)
	if err != nil {
		return fmt.Errorf("--cpu: %w", err)
	}
	tpl, pool := controller.Template(jobspec.Config{AgentImage: agentImage, ServeArgs: serve, ManagedBy: "fleetlift-controller", Processes: processes},
		namespace, name, image, credentials, v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: &mem, CPU: &c}}, replicas)
	for i, o := range []any{tpl, pool} {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		w.Write(b)
	}
	return nil
}
