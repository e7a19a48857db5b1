package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/forge"
	gitx "github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/metrics"
	"github.com/fleetlift/fleetlift/internal/notify"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// sandbox is what every sandbox gets: env, the agent's settings and the
// variables for its commands, and secrets, for the agent alone (the
// forge's token, the agent CLI's key). Both stay in the worker's memory.
func (w *workerFlags) sandbox() (env, secrets map[string]string, _ error) {
	env, secrets = map[string]string{}, map[string]string{}
	if w.agentCLI != "" {
		var argv []string
		if err := json.Unmarshal([]byte(w.agentCLI), &argv); err != nil || len(argv) == 0 {
			return nil, nil, fmt.Errorf(`--agent-cli must be a JSON array such as ["claude","-p"]`)
		}
		env[protocol.EnvAgentCLI] = w.agentCLI
	}
	var cliOnly []string
	for _, name := range w.agentEnv {
		if strings.HasPrefix(name, "FLEETLIFT_") {
			return nil, nil, fmt.Errorf("--agent-env %s: fleetlift's own variables are not for the agent CLI", name)
		}
		if name == w.gatewayKey || name == w.openAIKey {
			continue // the model gateway holds it
		}
		if v, ok := os.LookupEnv(name); ok {
			secrets[name] = v
			cliOnly = append(cliOnly, name)
		}
	}
	if len(cliOnly) > 0 {
		env[protocol.EnvAgentCLIEnv] = strings.Join(cliOnly, ",")
	}
	for _, name := range w.passEnv {
		if strings.HasPrefix(name, "FLEETLIFT_") || gitx.SecretName(name) {
			return nil, nil, fmt.Errorf("--sandbox-env %s: every command in a sandbox would see it; tokens and secrets never go to commands (give the agent CLI its key with --agent-env)", name)
		}
		if v, ok := os.LookupEnv(name); ok {
			env[name] = v
		}
	}
	roots, err := w.roots()
	if err != nil {
		return nil, nil, err
	}
	if len(roots) > 0 {
		env[protocol.EnvAllowFileRoots] = strings.Join(roots, string(filepath.ListSeparator))
	}
	forgeEnv, forgeSecrets := w.forge.sandbox()
	for k, v := range forgeEnv {
		env[k] = v
	}
	for k, v := range forgeSecrets {
		if !w.gitReads {
			secrets[k] = v
		}
	}
	return env, secrets, nil
}

// roots are the --allow-file-root directories, absolute.
func (w *workerFlags) roots() ([]string, error) {
	var roots []string
	for _, r := range w.fileRoots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("--allow-file-root %s: %w", r, err)
		}
		roots = append(roots, abs)
	}
	return roots, nil
}

// deliverer gives acts what it proposes changes with (Activities.Forges,
// Git and FileRoots): the local forge, pushing to repositories under
// --allow-file-root, and the operator's forge with its token, which no
// sandbox holds.
func (w *workerFlags) deliverer(acts *activity.Activities) error {
	roots, err := w.roots()
	if err != nil {
		return err
	}
	g := &gitx.Git{}
	fs := w.forge
	if fs != nil && fs.Type != "local" {
		g = &gitx.Git{TokenEnv: fs.TokenEnv, TokenOrigins: fs.gitOrigins()}
		if fs.Hub == nil {
			if err := fs.connect(w.metrics); err != nil {
				return err
			}
		}
	}
	local := activity.LocalForges(&gitx.Git{})
	acts.Git, acts.FileRoots = g, roots
	if w.followEvery != 0 && w.followEvery < time.Second {
		return fmt.Errorf("--pull-requests-every %s: want a second or more", w.followEvery)
	}
	acts.FollowEvery = w.followEvery
	if acts.NotifyServices, err = w.notifyServices(); err != nil {
		return err
	}
	if w.metrics != nil {
		acts.NotifyTried = w.metrics.NotifyTried
	}
	if w.gw != nil && w.gw.Git != nil {
		// The gateway's copies of what the sandboxes read: a change is
		// proposed from the copy its sandbox cloned.
		acts.Copies = w.gw
	}
	acts.Forges = func(name string) (forge.Forge, error) {
		if fs != nil && fs.Type == name && fs.Hub != nil {
			return fs.Hub, nil
		}
		f, err := local(name)
		if err != nil {
			return nil, fmt.Errorf("forge %q: this worker proposes changes on the local forge and on the forge the operator allows it (--forge-type, --forge-url)", name)
		}
		return f, nil
	}
	return nil
}

// notifyServices are the --notify services, by name, their secrets read
// from this process's environment.
func (w *workerFlags) notifyServices() (map[string]notify.Service, error) {
	out := map[string]notify.Service{}
	for _, f := range w.notify {
		s, err := notify.ParseService(f, os.Getenv)
		if err != nil {
			return nil, err
		}
		if _, ok := out[s.Name]; ok {
			return nil, fmt.Errorf("--notify %s: given twice", s.Name)
		}
		out[s.Name] = s
	}
	return out, nil
}

// shareWrites has the operator's forge account's writes, this worker's
// and those of the reconciler in the same process, wait for permits of
// the account's one budget on Temporal (dispatch.ForgeBudget), which
// every worker and replica writing with the account shares. It says the
// limits on logw.
func (w *workerFlags) shareWrites(c client.Client, logw io.Writer) {
	fs := w.forge
	if fs == nil {
		return
	}
	if id, limits, ok := fs.shareWrites(c, w.writesPerMinute, w.writesPerHour, false, w.metrics); ok {
		fmt.Fprintf(logw, "forge writes: %s shares one budget with every worker and reconciler writing as this account (%s): %s\n",
			fs.Name, id, limits)
	}
}

// shareWrites has fs's writes wait for permits of the account's one
// budget on Temporal (dispatch.ForgeBudget), with perMinute and perHour
// writes (-1: the forge's own limits), counted in m when set. With join,
// it never starts the budget (a reconciler without a worker): it writes
// through it while the workers have it running, and paces itself
// otherwise. It returns the budget's id and limits, and whether it
// shares one.
func (fs *forgeSetup) shareWrites(c client.Client, perMinute, perHour int, join bool, m *metrics.Metrics) (string, string, bool) {
	if fs.Budget == nil || fs.Type == string(spec.ForgeLocal) {
		return "", "", false
	}
	if perMinute < 0 {
		perMinute = forgeDefaultWrites(fs.Type, time.Minute)
	}
	if perHour < 0 {
		perHour = forgeDefaultWrites(fs.Type, time.Hour)
	}
	if perMinute == 0 && perHour == 0 && !join {
		return "", "", false
	}
	host := fs.URL
	if u, err := url.Parse(fs.URL); err == nil && u.Host != "" {
		host = u.Host
	}
	id := dispatch.ForgeBudgetID(host, fs.Token)
	caller, _ := os.Hostname()
	shared := &dispatch.ForgeBudget{Client: c, ID: id, Input: dispatch.ForgeBudgetInput(host, perMinute, perHour),
		Caller: fmt.Sprintf("%s/%d", caller, os.Getpid()), Join: join}
	if m != nil {
		shared.OnWait = m.PermitWaited(fs.Name)
	}
	fs.Budget.Share(shared)
	limits := writeLimits(perMinute, perHour)
	if join {
		limits = "the limits of the workers that run it"
	}
	return id, limits, true
}

// forgeDefaultWrites is the forge's own limit of writes per period:
// GitHub's secondary limits (80 a minute, 500 an hour); none for Gitea,
// whose limits its operator sets.
func forgeDefaultWrites(typ string, per time.Duration) int {
	if spec.ForgeType(typ) != spec.ForgeGitHub {
		return 0
	}
	if per == time.Minute {
		return 80
	}
	return 500
}

// writeLimits says the limits of a shared write budget.
func writeLimits(perMinute, perHour int) string {
	var parts []string
	if perMinute > 0 {
		parts = append(parts, fmt.Sprintf("at most %d a minute", perMinute))
	}
	if perHour > 0 {
		parts = append(parts, fmt.Sprintf("%d an hour", perHour))
	}
	return strings.Join(parts, " and ")
}
