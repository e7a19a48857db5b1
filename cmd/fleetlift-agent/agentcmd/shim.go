package agentcmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/agent/shim"
)

// exitError ends the process with a shim exit code after cobra returns.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// ShimExit reports whether err is a shim command's exit code, already
// explained on its standard error; otherwise the code is 1.
func ShimExit(err error) (code int, ok bool) {
	if e, ok := err.(exitError); ok {
		return e.code, true
	}
	return 1, false
}

func exit(code int) error {
	if code == 0 {
		return nil
	}
	return exitError{code}
}

// NewShimCommands returns the hidden commands a sandbox provider runs in a
// sandbox it reaches only through an exec API (package shim): install,
// idle, exec and file. Their errors carry exit codes (see ShimExit) and
// print nothing more than the shim did.
func NewShimCommands() []*cobra.Command {
	install := &cobra.Command{
		Use:    "install DIR",
		Short:  "Copy this fleetlift-agent into DIR (an init container's command)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			return shim.Install(self, args[0])
		},
	}
	idle := &cobra.Command{
		Use:    "idle",
		Short:  "Wait for SIGTERM (the exec container's main process)",
		Hidden: true,
		Args:   cobra.NoArgs,
		Run:    func(*cobra.Command, []string) { shim.Idle() },
	}

	var e shim.Exec
	execCmd := &cobra.Command{
		Use:    "exec [flags] -- COMMAND [ARGS...]",
		Short:  "Run one command for a sandbox provider",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e.Args = args
			return exit(e.Run(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	f := execCmd.Flags()
	f.SetInterspersed(false)
	f.StringVar(&e.Workspace, "workspace", "", "confine --dir to this directory")
	f.StringVar(&e.Dir, "dir", "", "the directory to run in (relative to --workspace)")
	f.BoolVar(&e.ClearEnv, "clear-env", false, "start from PATH and HOME alone")
	f.StringArrayVar(&e.Env, "env", nil, "NAME=VALUE to set (repeatable)")
	f.DurationVar(&e.Timeout, "timeout", 0, "kill the command's process group after this long")
	f.StringVar(&e.StdinFile, "stdin-file", "", "the command's standard input, removed once opened")
	f.BoolVar(&e.HangupOnEOF, "hangup-on-eof", false, "kill the command when this process's standard input ends")

	file := &cobra.Command{Use: "file", Short: "Read and write workspace files for a sandbox provider", Hidden: true}
	var g shim.Get
	get := &cobra.Command{
		Use:  "get [flags] PATH",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g.Path = args[0]
			return exit(g.Run(cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	get.Flags().StringVar(&g.Workspace, "workspace", "", "the workspace")
	get.Flags().Int64Var(&g.Offset, "offset", 0, "start at this byte")
	get.Flags().Int64Var(&g.Length, "length", 0, "read at most this many bytes (0: to the end)")
	get.Flags().BoolVar(&g.Base64, "base64", false, "encode the output in base64")
	var p shim.Put
	put := &cobra.Command{
		Use:  "put [flags]",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exit(p.Run(cmd.ErrOrStderr()))
		},
	}
	put.Flags().StringVar(&p.Workspace, "workspace", "", "the workspace")
	put.Flags().StringVar(&p.Scratch, "scratch", "", "the directory uploads collect in, outside the workspace")
	put.Flags().StringVar(&p.Upload, "upload", "", "the upload's name")
	put.Flags().StringArrayVar(&p.Data, "data", nil, "a base64 chunk to append (repeatable)")
	put.Flags().StringVar(&p.Commit, "commit", "", "replace this file with the upload")
	put.Flags().BoolVar(&p.Abort, "abort", false, "remove the upload")
	file.AddCommand(get, put)
	for _, c := range []*cobra.Command{execCmd, get, put} {
		c.SilenceErrors = true
		c.SilenceUsage = true
	}
	return []*cobra.Command{install, idle, execCmd, file}
}
