package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/gitea"
	"github.com/fleetlift/fleetlift/internal/forge/github"
	gitx "github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/metrics"
	"github.com/fleetlift/fleetlift/internal/repoquery"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// The operator's forge settings in the environment, for the flags'
// defaults.
const (
	envForgeType = "FLEETLIFT_FORGE_TYPE"
	envForgeURL  = "FLEETLIFT_FORGE_URL"
)

// DefaultForgeTokenEnv holds an allowed forge's token when the operator
// names no other variable for it.
const DefaultForgeTokenEnv = "FLEETLIFT_FORGE_TOKEN"

// forgeFlags are the forges the operator allows fleetlift to talk to,
// each with the variable that holds its token: the one --forge-type and
// --forge-url name (or FLEETLIFT_FORGE_TYPE and FLEETLIFT_FORGE_URL),
// named after its type, and each --forge. A campaigns repository's config
// only selects among them (desired.SelectForge): it never names a URL
// fleetlift would otherwise not talk to, nor the variable a token is read
// from.
type forgeFlags struct {
	typ, url, tokenEnv string
	forges             []string
	// metrics, set by the command, counts the requests to the forge and
	// its rate-limit waits; nil: not kept.
	metrics *metrics.Metrics
}

func (f *forgeFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.typ, "forge-type", "",
		"the forge fleetlift may talk to: github or gitea; the repository config selects it with forge.type")
	fl.StringVar(&f.url, "forge-url", "",
		"that forge's root (Gitea) or API root (GitHub Enterprise; GitHub's when empty)")
	fl.StringVar(&f.tokenEnv, "forge-token-env", DefaultForgeTokenEnv,
		"the environment variable holding that forge's token")
	fl.StringArrayVar(&f.forges, "forge", nil,
		"another forge fleetlift may talk to, as name=NAME,type=github|gitea,url=URL[,token-env=VAR] (token-env defaults to "+DefaultForgeTokenEnv+"); the repository config selects it with forge.name (repeatable)")
}

// operatorForge is a forge the operator allows, with the variable that
// holds its token.
type operatorForge struct {
	desired.Forge
	TokenEnv string
}

var (
	forgeNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	envNameRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// allowed returns the forges the flags allow, checked.
func (f *forgeFlags) allowed() ([]operatorForge, error) {
	var out []operatorForge
	if f.typ != "" || f.url != "" {
		if f.typ == "" {
			return nil, usageErrorf("--forge-url (or $%s) needs --forge-type (or $%s): github or gitea", envForgeURL, envForgeType)
		}
		of, err := newOperatorForge(f.typ, f.typ, f.url, f.tokenEnv)
		if err != nil {
			return nil, usageErrorf("--forge-type %s: %w", f.typ, err)
		}
		out = append(out, of)
	}
	for _, s := range f.forges {
		of, err := parseForgeFlag(s)
		if err != nil {
			return nil, usageErrorf("--forge %q: %w", s, err)
		}
		out = append(out, of)
	}
	seen := map[string]bool{}
	for _, of := range out {
		if seen[of.Name] {
			return nil, fmt.Errorf("two allowed forges are named %s: give each --forge its own name", of.Name)
		}
		seen[of.Name] = true
	}
	return out, nil
}

// parseForgeFlag reads one --forge: name=NAME,type=TYPE,url=URL,token-env=VAR.
func parseForgeFlag(s string) (operatorForge, error) {
	kv := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return operatorForge{}, fmt.Errorf("%q is not key=value", part)
		}
		switch k {
		case "name", "type", "url", "token-env":
		default:
			return operatorForge{}, fmt.Errorf("unknown key %q: use name, type, url and token-env", k)
		}
		if _, dup := kv[k]; dup {
			return operatorForge{}, fmt.Errorf("%s is given twice", k)
		}
		kv[k] = v
	}
	if kv["type"] == "" {
		return operatorForge{}, errors.New("type is required: github or gitea")
	}
	name := kv["name"]
	if name == "" {
		name = kv["type"]
	}
	tokenEnv := kv["token-env"]
	if tokenEnv == "" {
		tokenEnv = DefaultForgeTokenEnv
	}
	return newOperatorForge(name, kv["type"], kv["url"], tokenEnv)
}

// newOperatorForge checks one allowed forge.
func newOperatorForge(name, typ, rawURL, tokenEnv string) (operatorForge, error) {
	of := operatorForge{Forge: desired.Forge{Name: name, Type: spec.ForgeType(typ), URL: rawURL}, TokenEnv: tokenEnv}
	switch of.Type {
	case spec.ForgeGitHub:
		if of.URL == "" {
			of.URL = github.DefaultBaseURL
		}
	case spec.ForgeGitea:
		if of.URL == "" {
			return operatorForge{}, errors.New("a gitea forge needs its url")
		}
	case spec.ForgeLocal:
		return operatorForge{}, errors.New("the local forge is always allowed: allow github or gitea forges")
	default:
		return operatorForge{}, fmt.Errorf("unknown forge type %q: github or gitea", typ)
	}
	if !forgeNameRe.MatchString(name) {
		return operatorForge{}, fmt.Errorf("name %q must be 1-63 lower-case letters, digits or '-', starting and ending with a letter or digit", name)
	}
	if !envNameRe.MatchString(tokenEnv) {
		return operatorForge{}, fmt.Errorf("token variable %q is not an environment variable name", tokenEnv)
	}
	u, err := url.Parse(of.URL)
	switch {
	case err != nil:
		return operatorForge{}, fmt.Errorf("url: %w", err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return operatorForge{}, fmt.Errorf("url %q must be an http(s) URL", gitx.Redact(of.URL))
	case u.User != nil:
		return operatorForge{}, fmt.Errorf("url %q must not hold credentials: the token goes in $%s", gitx.Redact(of.URL), tokenEnv)
	}
	return of, nil
}

// forgeSetup is the forge a campaigns repository's config selects among
// the operator's, as the reconciler and its workers use it.
type forgeSetup struct {
	// Name is the operator's name for the forge; Type is local, github
	// or gitea.
	Name string
	Type string
	// URL is the forge's root (Gitea) or API root (GitHub).
	URL string
	// TokenEnv names the operator's variable holding the token; Token is
	// its value.
	TokenEnv string
	Token    string
	// Hub talks to the forge; nil for the local forge. Budget is the
	// account's request budget it talks through (shareWrites).
	Hub    forge.Hub
	Budget *github.Budget
	// transfers bounds the git transfers with the forge at once
	// (--forge-parallel-clones; see workerFlags.shareBudgets): made on
	// first use (slots), and shared by copies of the setup.
	transfers *transferSlots
}

// localForge is the forge of a repository without a usable config or
// that selects the local forge.
func localForge() *forgeSetup {
	return &forgeSetup{Name: desired.LocalForge.Name, Type: string(spec.ForgeLocal)}
}

// selected is the forge as the config's selection names it.
func (f *forgeSetup) selected() desired.Forge {
	return desired.Forge{Name: f.Name, Type: spec.ForgeType(f.Type), URL: f.URL}
}

// setup is the forge cfg selects among the operator's, with its token
// and a Hub to talk to it: a selection of a forge the operator did not
// allow is an error naming the config's file, line and field, and
// nothing talks to the forge it names.
func (f *forgeFlags) setup(cfg *spec.Config) (*forgeSetup, error) {
	allowed, err := f.allowed()
	if err != nil {
		return nil, err
	}
	choices := make([]desired.Forge, len(allowed))
	for i, of := range allowed {
		choices[i] = of.Forge
	}
	sel, err := desired.SelectForge(cfg, choices)
	if err != nil {
		return nil, err
	}
	if sel.Type == spec.ForgeLocal {
		return localForge(), nil
	}
	var of operatorForge
	for _, a := range allowed {
		if a.Name == sel.Name {
			of = a
		}
	}
	fs := &forgeSetup{Name: of.Name, Type: string(of.Type), URL: of.URL, TokenEnv: of.TokenEnv, Token: os.Getenv(of.TokenEnv)}
	if fs.Token == "" {
		return nil, fmt.Errorf("forge %s needs a token in $%s", of.Forge, of.TokenEnv)
	}
	if err := fs.connect(f.metrics); err != nil {
		return nil, err
	}
	return fs, nil
}

// resolver resolves repositories_from through fs: the local forge lists
// no repositories, so there each definition with queries is an error.
func (fs *forgeSetup) resolver() *repoquery.Resolver {
	if fs == nil || fs.Hub == nil {
		return &repoquery.Resolver{}
	}
	l, _ := fs.Hub.(forge.Lister)
	return &repoquery.Resolver{Forge: l, ForgeName: fs.Name}
}

// resolver is the repoquery.Resolver of the forge cfg selects among
// those the operator allows; when it cannot be used (not allowed, no
// token), every definition with queries is an error saying why.
func (f *forgeFlags) resolver(cfg *spec.Config) *repoquery.Resolver {
	fs, err := f.setup(cfg)
	if err != nil {
		return &repoquery.Resolver{Unavailable: err}
	}
	return fs.resolver()
}

// connect gives fs its Hub, the adapter that talks to the forge with its
// token (which it sends only to the forge's own origin), counted in m
// when set.
func (fs *forgeSetup) connect(m *metrics.Metrics) error {
	g := &gitx.Git{TokenEnv: fs.TokenEnv, Slots: fs.slots()}
	var hc *http.Client
	o := github.BudgetOptions{}
	if spec.ForgeType(fs.Type) == spec.ForgeGitea {
		o = gitea.BudgetOptions()
	}
	if m != nil {
		hc = &http.Client{Transport: m.ForgeTransport(fs.Name, nil)}
		o.OnRateLimitWait = m.RateLimitWait(fs.Name)
	}
	o.Logger = slog.Default().With("forge", fs.Name)
	budget := github.NewBudget(o)
	fs.Budget = budget
	var err error
	switch spec.ForgeType(fs.Type) {
	case spec.ForgeGitea:
		fs.Hub, err = gitea.New(gitea.Options{URL: fs.URL, Token: fs.Token, Git: g, HTTPClient: hc, Budget: budget})
	case spec.ForgeGitHub:
		fs.Hub, err = github.New(github.Options{BaseURL: fs.URL, Token: fs.Token, Git: g, HTTPClient: hc, Budget: budget})
	}
	if err != nil {
		return fmt.Errorf("forge %s: %w", fs.Name, err)
	}
	return nil
}

// readForge reads the config at ref and returns the forge it selects
// among the operator's. A config that does not load selects the local
// forge, and its problems are returned. The reconciler chooses its forge
// when it starts: a change to the config's forge section takes effect at
// the next start (forgeGate holds launches until then).
func readForge(ctx context.Context, src *source.Repo, ref string, forges *forgeFlags) (*forgeSetup, spec.Errors, error) {
	sha, err := src.Resolve(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	root, err := src.FS(ctx, sha, "")
	if err != nil {
		return nil, nil, err
	}
	cfg, _, problems, err := desired.Config(ctx, &spec.Loader{}, root)
	if err != nil {
		return nil, nil, err
	}
	if len(problems) > 0 {
		if _, err := forges.allowed(); err != nil {
			return nil, nil, err
		}
		return localForge(), problems, nil
	}
	fs, err := forges.setup(cfg)
	return fs, nil, err
}

// sandbox is what the agent in a sandbox needs to clone from the forge:
// env, the only origin git may send the token to, and secrets, the token
// under git's variable. Both stay in the worker's memory. The agent
// opens no pull request: the worker does (activity.Delivery), and the
// forge's API sees no request from a sandbox.
func (f *forgeSetup) sandbox() (env, secrets map[string]string) {
	if f == nil || f.Type == "local" {
		return nil, nil
	}
	env = map[string]string{protocol.EnvGitTokenOrigins: strings.Join(f.gitOrigins(), ",")}
	return env, map[string]string{gitx.DefaultTokenEnv: f.Token}
}

// envAnthropicAPIKey is the agent CLI's API key: --agent-env's default,
// and the variable a definition's credentials.anthropic gives.
const envAnthropicAPIKey = "ANTHROPIC_API_KEY"

// credentialVariables are the variables a definition's credentials give
// the agent in Kubernetes sandboxes: credentials.github the token git
// clones with, and credentials.anthropic the agent
// CLI's key, listed as the CLI's alone.
func credentialVariables() activity.CredentialVariables {
	return activity.CredentialVariables{
		Forge:        []string{gitx.DefaultTokenEnv},
		AgentCLI:     envAnthropicAPIKey,
		AgentCLIList: protocol.EnvAgentCLIEnv,
	}
}

// gitOrigins are the origins git may send the forge's token to: the
// forge's own web origin (GitHub's API at api.github.com serves git at
// github.com).
func (f *forgeSetup) gitOrigins() []string {
	var o string
	var err error
	switch f.Type {
	case string(spec.ForgeGitHub):
		o, err = github.WebOrigin(f.URL)
	default:
		o, err = gitx.Origin(f.URL)
	}
	if err != nil {
		return nil
	}
	return []string{o}
}
