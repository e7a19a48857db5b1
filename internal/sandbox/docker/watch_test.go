package docker

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/sandboxtest"
)

// A watch on a sandbox wakes whenever the agent records a phase, through
// to its end: read only on wake-ups, never on a timer, the status shows
// the agent's run complete. A watch on a path out of the workspace, or on
// a sandbox that is not there, is refused.
func TestWatchWakesWhenTheAgentRecordsAPhase(t *testing.T) {
	p := newProvider(t, newScope(), func(o *Options) { o.Binds = []string{reposRoot} })
	url, show := newRepository(t, map[string]string{"README.md": "# svc\n"})
	opts := agentOptions(newID("watch"))
	provision(t, p, opts)
	changed, stop, err := p.Watch(opts.ID, protocol.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	ctx := testCtx(t)
	// The command lasts long enough for the agent to record a phase on
	// the way (news it writes at most once a second).
	data, err := json.Marshal(transform(url, `sleep 1.5; echo watched >> README.md`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CopyTo(ctx, opts.ID, strings.NewReader(string(data)), protocol.Dir+"/"+protocol.ManifestFile); err != nil {
		t.Fatal(err)
	}
	var phases []protocol.Phase
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no wake-up after the phases %v", phases)
		}
		rc, err := p.CopyFrom(ctx, opts.ID, protocol.Dir+"/"+protocol.StatusFile)
		if errors.Is(err, sandbox.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var st protocol.Status
		derr := json.NewDecoder(rc).Decode(&st)
		rc.Close()
		if derr != nil {
			continue
		}
		if len(phases) == 0 || phases[len(phases)-1] != st.Phase {
			phases = append(phases, st.Phase)
		}
		if st.Phase.Terminal() {
			if st.Phase != protocol.PhaseComplete {
				t.Fatalf("the agent ended %s: %s", st.Phase, st.Message)
			}
			break
		}
	}
	if len(phases) < 2 {
		t.Errorf("woken for phases %v only; want each phase on the way to complete", phases)
	}
	sandboxtest.Propose(t, p, opts.ID, transform(url, ""), reposRoot)
	if got := show(testBranch, "README.md"); !strings.Contains(got, "watched") {
		t.Errorf("the change was not pushed: README.md on %s is %q", testBranch, got)
	}

	for _, dir := range []string{"../etc", "/workspace/.fleetlift"} {
		if _, _, err := p.Watch(opts.ID, dir); err == nil {
			t.Errorf("Watch(%q) was allowed", dir)
		}
	}
	if _, _, err := p.Watch(newID("nothing"), protocol.Dir); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Watch of a missing sandbox: %v, want ErrNotFound", err)
	}
}
