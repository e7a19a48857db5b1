package entrypoint

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
)

// Usage is the entrypoint's command line.
const Usage = "fleetlift-agent entrypoint [--user NAME|UID[:GID]] [--workdir DIR] -- ARGS..."

// DefaultWorkdir is the sandbox workspace of seeds 000 and 003.
const DefaultWorkdir = "/workspace"

// Self is what the entrypoint executes: the running executable, wherever
// it was started from, so the agent is the same binary.
const Self = "/proc/self/exe"

// Config is one run of the entrypoint.
type Config struct {
	// User is NAME, UID or UID:GID (see Resolve); "" means $AGENT_USER,
	// else Resolve's default.
	User string
	// Workdir is the absolute directory the agent starts in; "" means
	// $AGENT_WORKDIR, else DefaultWorkdir.
	Workdir string
	// Args are the agent's arguments, such as serve --workspace
	// /workspace.
	Args []string
}

// Parse parses the entrypoint's arguments (Usage, without the command
// names): its flags, then "--", then the agent's arguments.
func Parse(args []string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("entrypoint", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.User, "user", "", "the agent user: NAME, UID or UID:GID")
	fs.StringVar(&c.Workdir, "workdir", "", "the directory the agent starts in")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, fmt.Errorf("usage: %s", Usage)
		}
		return Config{}, fmt.Errorf("%w; usage: %s", err, Usage)
	}
	dash := slices.Index(args, "--")
	if dash < 0 || len(args)-dash-1 != fs.NArg() {
		return Config{}, fmt.Errorf("want -- before the agent's arguments; usage: %s", Usage)
	}
	if fs.NArg() == 0 {
		return Config{}, fmt.Errorf("no agent arguments after --, such as serve --workspace %s; usage: %s", DefaultWorkdir, Usage)
	}
	if err := checkWorkdir(c.Workdir); err != nil {
		return Config{}, fmt.Errorf("--workdir %s: %w", c.Workdir, err)
	}
	c.Args = fs.Args()
	return c, nil
}

// settings fills in the defaults from the environment env.
func (c Config) settings(env []string) (Config, error) {
	if c.User == "" {
		c.User = lookupEnv(env, EnvUser)
	}
	if c.Workdir == "" {
		c.Workdir = lookupEnv(env, EnvWorkdir)
		if err := checkWorkdir(c.Workdir); err != nil {
			return Config{}, fmt.Errorf("%s=%s: %w", EnvWorkdir, c.Workdir, err)
		}
	}
	if c.Workdir == "" {
		c.Workdir = DefaultWorkdir
	}
	return c, nil
}

// checkWorkdir refuses a working directory the entrypoint must not give
// the agent user: a relative one, or the root.
func checkWorkdir(dir string) error {
	switch {
	case dir == "":
		return nil
	case !filepath.IsAbs(dir):
		return errors.New("want an absolute directory")
	case filepath.Clean(dir) == "/":
		return errors.New("want a directory below /, which the agent user must not own")
	}
	return nil
}

// argv is the agent's command line: the program name, the commands above
// the entrypoint (prefix: "agent" for fleetlift), then the agent's
// arguments.
func (c Config) argv(name string, prefix []string) []string {
	return slices.Concat([]string{name}, prefix, c.Args)
}

func lookupEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			v = kv[len(name)+1:]
		}
	}
	return v
}
