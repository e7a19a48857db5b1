package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/gitea"
	"github.com/fleetlift/fleetlift/internal/forge/github"
	gitx "github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// forgeSetup is the forge a campaigns repository's config names, as the
// reconciler and its workers use it.
type forgeSetup struct {
	// Type is local, github or gitea.
	Type string
	// URL is the forge's root (Gitea) or API root (GitHub Enterprise).
	URL string
	// TokenEnv names the variable holding the token; Token is its value.
	TokenEnv string
	Token    string
	// Hub talks to the forge; nil for the local forge.
	Hub forge.Hub
}

// DefaultForgeTokenEnv holds the forge token when the config's
// forge.token_env does not name another variable.
const DefaultForgeTokenEnv = agentcmd.EnvForgeToken

// readForge reads the forge from the config at the head of branch. The
// forge is chosen when the reconciler starts: a change to the config's
// forge takes effect at the next start.
func readForge(ctx context.Context, src *source.Repo, branch string) (*forgeSetup, error) {
	sha, err := src.Resolve(ctx, branch)
	if err != nil {
		return nil, err
	}
	root, err := src.FS(ctx, sha, "")
	if err != nil {
		return nil, err
	}
	cfg, name, problems, err := desired.Config(ctx, &spec.Loader{}, root)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 || cfg == nil {
		// No usable config: the local forge; the passes report the
		// config's problems.
		return &forgeSetup{Type: "local"}, nil
	}
	fs := &forgeSetup{Type: string(cfg.Forge.Type), URL: cfg.Forge.URL, TokenEnv: cfg.Forge.TokenEnv}
	if fs.Type == "" || fs.Type == "local" {
		fs.Type = "local"
		return fs, nil
	}
	if fs.TokenEnv == "" {
		fs.TokenEnv = DefaultForgeTokenEnv
	}
	fs.Token = os.Getenv(fs.TokenEnv)
	if fs.Token == "" {
		return nil, fmt.Errorf("%s says forge %s: its token must be in $%s", name, fs.Type, fs.TokenEnv)
	}
	g := &gitx.Git{TokenEnv: fs.TokenEnv, TokenOrigins: fs.gitOrigins()}
	switch fs.Type {
	case "gitea":
		fs.Hub, err = gitea.New(gitea.Options{URL: fs.URL, Token: fs.Token, Git: g})
	case "github":
		fs.Hub, err = github.New(github.Options{BaseURL: fs.URL, Token: fs.Token, Git: g})
	default:
		err = fmt.Errorf("%s: unknown forge type %q", name, fs.Type)
	}
	if err != nil {
		return nil, err
	}
	return fs, nil
}

// sandbox is what the agent in a sandbox needs to open pull requests on
// the forge and to clone from it: env, the forge's URL and the only origin
// git may send the token to, and secrets, the token under the agent's and
// git's variables. Both stay in the worker's memory.
func (f *forgeSetup) sandbox() (env, secrets map[string]string) {
	if f == nil || f.Type == "local" {
		return nil, nil
	}
	env = map[string]string{agent.EnvGitTokenOrigins: strings.Join(f.gitOrigins(), ",")}
	if f.URL != "" {
		env[agentcmd.EnvForgeURL] = f.URL
	}
	return env, map[string]string{agentcmd.EnvForgeToken: f.Token, gitx.DefaultTokenEnv: f.Token}
}

// gitOrigins are the origins git may send the forge's token to: the
// forge's own web origin (GitHub's API at api.github.com serves git at
// github.com).
func (f *forgeSetup) gitOrigins() []string {
	if f.Type == "github" && f.URL == "" {
		return []string{"https://github.com"}
	}
	o, err := gitx.Origin(f.URL)
	if err != nil {
		return nil
	}
	if f.Type == "github" && o == "https://api.github.com" {
		return []string{"https://github.com"}
	}
	return []string{o}
}
