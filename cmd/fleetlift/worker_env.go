package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/gateway"
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
	g := &gitx.Git{ScratchDir: w.scratch}
	fs := w.forge
	if fs != nil && fs.Type != "local" {
		g = &gitx.Git{TokenEnv: fs.TokenEnv, TokenOrigins: fs.gitOrigins(), Slots: fs.slots(), ScratchDir: w.scratch}
		if fs.Hub == nil {
			if err := fs.connect(w.metrics); err != nil {
				return err
			}
		}
	}
	local, localForge := activity.LocalForges(&gitx.Git{ScratchDir: w.scratch})
	w.localForge = localForge
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
	if w.gw != nil {
		// What the gateway counted for a sandbox lost before it
		// finished is its task's (activity.CleanupOutcome).
		acts.GatewayUsage = w.gw.UsageOf
		if w.tokensPerMinute > 0 {
			// An agentic task's sandbox waits for the account's
			// tokens a minute before it is made.
			acts.PaceAgents = w.gw.WaitForTokens
		}
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

// shareBudgets has the operator's forge account's writes, requests and
// git transfers, this worker's and those of the reconciler in the same
// process, wait for the account's shared budgets on Temporal
// (dispatch.ForgeBudget, dispatch.ForgeSlots), which every worker and
// replica using the account shares. It says the limits on logw.
func (w *workerFlags) shareBudgets(c client.Client, logw io.Writer) error {
	switch {
	case w.requestsPerHour < 0:
		return usageErrorf("--forge-requests-per-hour %d: want 0 (none) or more", w.requestsPerHour)
	case w.parallelClones < 0:
		return usageErrorf("--forge-parallel-clones %d: want 0 (none) or more", w.parallelClones)
	}
	w.shareModelPace(c, logw)
	fs := w.forge
	if fs == nil {
		return nil
	}
	if id, limits, ok := fs.shareWrites(c, w.writesPerMinute, w.writesPerHour, w.requestsPerHour, false, w.metrics); ok {
		fmt.Fprintf(logw, "forge writes: %s shares one budget with every worker and reconciler writing as this account (%s): %s\n",
			fs.Name, id, limits)
	}
	if w.parallelClones > 0 && fs.Budget != nil && fs.Type != string(spec.ForgeLocal) {
		host := fs.host()
		slots := &dispatch.ForgeSlots{Client: c, ID: dispatch.ForgeSlotsID(host, fs.Token),
			Input: dispatch.ForgeSlotsInput(host, w.parallelClones, 0), Caller: callerName(),
			Logger: slog.Default().With("forge", fs.Name)}
		if w.metrics != nil {
			slots.OnWait = w.metrics.SlotWaited(fs.Name)
		}
		fs.slots().set(slots)
		fmt.Fprintf(logw, "forge transfers: %s shares %d transfer slots with every worker cloning and pushing as this account (%s)\n",
			fs.Name, w.parallelClones, slots.ID)
	}
	return nil
}

// shareModelPace has the gateway keep --tokens-per-minute with every
// worker calling the model as its account (dispatch.ModelPace), rather
// than by itself: the account's rate limit is the account's, however
// many workers use it. It says so on logw.
func (w *workerFlags) shareModelPace(c client.Client, logw io.Writer) {
	gw := w.gw
	if gw == nil || w.tokensPerMinute <= 0 {
		return
	}
	// The account the limit is for: the Messages API's, else the
	// OpenAI-compatible one's.
	var host, key string
	switch {
	case gw.Upstream != nil && gw.Key != "":
		host, key = gw.Upstream.Host, gw.Key
	case gw.OpenAI != nil && gw.OpenAI.Key != "":
		host, key = gw.OpenAI.Upstream.Host, gw.OpenAI.Key
	default:
		return
	}
	pace := &dispatch.ModelPace{Budget: &dispatch.ForgeBudget{Client: c, ID: dispatch.ModelBudgetID(host, key),
		Input: dispatch.ModelBudgetInput(host, w.tokensPerMinute), Caller: callerName()}, Local: gateway.NewPace()}
	gw.SharePace(pace)
	fmt.Fprintf(logw, "model calls: %d tokens a minute, shared with every worker calling %s as this account (%s)\n", w.tokensPerMinute, host, pace.Budget.ID)
}

// shareWrites has fs's writes wait for permits of the account's one
// budget on Temporal (dispatch.ForgeBudget), with perMinute and perHour
// writes (-1: the forge's own limits), counted in m when set; and, with
// requestsPerHour, every request for permits of the account's budget of
// requests. With join, it never starts the budgets (a reconciler without
// a worker): it sends through them while the workers have them running,
// and paces itself otherwise, joining only the budgets no worker in this
// process shares already. It returns the write budget's id and the
// limits, and whether it shares one.
func (fs *forgeSetup) shareWrites(c client.Client, perMinute, perHour, requestsPerHour int, join bool, m *metrics.Metrics) (string, string, bool) {
	if fs.Budget == nil || fs.Type == string(spec.ForgeLocal) {
		return "", "", false
	}
	if perMinute < 0 {
		perMinute = forgeDefaultWrites(fs.Type, time.Minute)
	}
	if perHour < 0 {
		perHour = forgeDefaultWrites(fs.Type, time.Hour)
	}
	host := fs.host()
	// A reconciler joins only what no worker in its process shares.
	if requestsPerHour > 0 && !join || join && fs.Budget.SharedRequestsBudget() == nil {
		requests := &dispatch.ForgeBudget{Client: c, ID: dispatch.ForgeRequestsID(host, fs.Token),
			Input: dispatch.ForgeRequestsInput(host, requestsPerHour), Caller: callerName(), Join: join}
		if m != nil {
			requests.OnWait = m.RequestPermitWaited(fs.Name)
		}
		fs.Budget.ShareRequests(requests)
	}
	if perMinute == 0 && perHour == 0 && !join || join && fs.Budget.SharedBudget() != nil {
		return "", "", false
	}
	id := dispatch.ForgeBudgetID(host, fs.Token)
	shared := &dispatch.ForgeBudget{Client: c, ID: id, Input: dispatch.ForgeBudgetInput(host, perMinute, perHour),
		Caller: callerName(), Join: join}
	if m != nil {
		shared.OnWait = m.PermitWaited(fs.Name)
	}
	fs.Budget.Share(shared)
	limits := writeLimits(perMinute, perHour)
	if requestsPerHour > 0 {
		limits += fmt.Sprintf("; requests of any kind, at most %d an hour", requestsPerHour)
	}
	if join {
		limits = "the limits of the workers that run it"
	}
	return id, limits, true
}

// host is the forge's host, for its budgets' ids.
func (fs *forgeSetup) host() string {
	if u, err := url.Parse(fs.URL); err == nil && u.Host != "" {
		return u.Host
	}
	return fs.URL
}

// callerName names this process in the shared budgets' histories.
func callerName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// transferSlots is the forge account's bound on git transfers at once
// (--forge-parallel-clones), which every Git talking to the operator's
// forge waits for. The worker sets it once it has shared it
// (shareBudgets); until then, and without the flag, it bounds nothing.
type transferSlots struct {
	mu    sync.Mutex
	slots gitx.Slots
}

var _ gitx.Slots = (*transferSlots)(nil)

// slots is fs's transfer slots, made on first use.
func (fs *forgeSetup) slots() *transferSlots {
	if fs.transfers == nil {
		fs.transfers = &transferSlots{}
	}
	return fs.transfers
}

func (t *transferSlots) set(s gitx.Slots) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slots = s
}

// Acquire waits for a slot of the shared bound when there is one.
func (t *transferSlots) Acquire(ctx context.Context) (func(), error) {
	t.mu.Lock()
	s := t.slots
	t.mu.Unlock()
	if s == nil {
		return func() {}, nil
	}
	return s.Acquire(ctx)
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
