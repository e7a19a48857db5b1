package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

func TestDeterministicTransform(t *testing.T) {
	tests := []struct {
		name      string
		command   []string
		env       map[string]string
		verifiers []protocol.Verifier
		// want
		phase      protocol.Phase
		repoStatus string
		errorPart  string
		pushed     bool
		diffPart   string // text in README.md's diff
		verifier   *protocol.VerifierResult
	}{
		{
			name:       "verifiers pass",
			command:    sh(`echo "$GREETING" >> README.md`),
			env:        map[string]string{"GREETING": "hello from the command"},
			verifiers:  []protocol.Verifier{{Name: "greeted", Command: []string{"grep", "-q", "hello", "README.md"}}},
			phase:      protocol.PhaseComplete,
			repoStatus: "success",
			pushed:     true,
			diffPart:   "+hello from the command",
			verifier:   &protocol.VerifierResult{Name: "greeted", Success: true, ExitCode: 0},
		},
		{
			name:       "verifiers fail",
			command:    sh(`echo change >> README.md`),
			verifiers:  []protocol.Verifier{{Name: "build", Command: sh(`echo "build broke" >&2; exit 2`)}},
			phase:      protocol.PhaseFailed,
			repoStatus: "failed",
			errorPart:  "verifier build failed with exit status 2",
			diffPart:   "+change",
			verifier:   &protocol.VerifierResult{Name: "build", Success: false, ExitCode: 2, Output: "build broke\n"},
		},
		{
			name:       "command fails",
			command:    sh(`echo partial >> README.md; exit 3`),
			verifiers:  []protocol.Verifier{{Name: "never", Command: []string{"true"}}},
			phase:      protocol.PhaseFailed,
			repoStatus: "failed",
			errorPart:  "command exited with status 3",
			diffPart:   "+partial",
		},
		{
			name:       "command fails saying why",
			command:    sh(`echo partial >> README.md; echo "sed: no such file" >&2; printf 'jq: \033[31merror\033[0m: bad filter\n\n' >&2; exit 4`),
			phase:      protocol.PhaseFailed,
			repoStatus: "failed",
			errorPart:  "command exited with status 4: jq: ?[31merror?[0m: bad filter",
			diffPart:   "+partial",
		},
		{
			name:       "command not found",
			command:    []string{"no-such-program-fleetlift"},
			phase:      protocol.PhaseFailed,
			repoStatus: "failed",
			errorPart:  "command exited with status 127: ",
		},
		{
			name:       "no change",
			command:    []string{"true"},
			phase:      protocol.PhaseComplete,
			repoStatus: "skipped",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := manifest(repo("svc", remote))
			m.Execution.Command = tt.command
			m.Execution.Env = tt.env
			m.Verifiers = tt.verifiers
			res := run(t, o, m)

			if res.Status != tt.phase {
				t.Fatalf("phase %s, want %s (error %q)", res.Status, tt.phase, res.Error)
			}
			r := repoResult(t, res, "svc")
			if r.Status != tt.repoStatus || !strings.Contains(r.Error, tt.errorPart) {
				t.Fatalf("repository %s %q, want %s %q", r.Status, r.Error, tt.repoStatus, tt.errorPart)
			}
			if tt.diffPart != "" {
				d := diffOf(r, "README.md")
				if d == nil || d.Status != "modified" || d.Additions != 1 || !strings.Contains(d.Diff, tt.diffPart) {
					t.Fatalf("README.md diff = %+v, want one added line %q", d, tt.diffPart)
				}
				if len(r.FilesModified) != 1 || r.FilesModified[0] != "README.md" {
					t.Errorf("files modified %v", r.FilesModified)
				}
			} else if len(r.Diffs) != 0 {
				t.Fatalf("unexpected diffs %+v", r.Diffs)
			}
			if tt.verifier != nil {
				if len(r.VerifierResults) != 1 || r.VerifierResults[0] != *tt.verifier {
					t.Fatalf("verifier results %+v, want %+v", r.VerifierResults, *tt.verifier)
				}
			} else if len(r.VerifierResults) != 0 {
				t.Fatalf("verifiers ran after a failed command: %+v", r.VerifierResults)
			}

			// The agent pushes nothing: it leaves the change for the
			// worker.
			if head := remoteRef(t, remote, "refs/heads/"+branch); head != "" || r.PullRequest != nil {
				t.Fatalf("the agent pushed %s / %+v", head, r.PullRequest)
			}
			dir, commit := leftChange(t, o, remote, r)
			if !tt.pushed {
				if commit != "" {
					t.Fatalf("left change %s for a repository that should not get a pull request", commit)
				}
				return
			}
			if commit == "" {
				t.Fatal("no change left for the worker")
			}
			if got := gittest.Run(t, dir, "show", commit+":README.md"); !strings.Contains(got, tt.diffPart[1:]) {
				t.Errorf("README.md left = %q", got)
			}
			if author := gittest.Run(t, dir, "log", "-1", "--format=%an <%ae> %s", commit); author != "Fleetlift Bot <bot@example.com> Test change" {
				t.Errorf("commit %q", author)
			}
		})
	}
}

func TestOneOfTwoRepositoriesFails(t *testing.T) {
	o := options(t)
	parent := t.TempDir()
	good := gittest.NewRemote(t, parent, "good", map[string]string{"README.md": "ok\n"})
	bad := gittest.NewRemote(t, parent, "bad", map[string]string{"README.md": "ok\n", "broken": "yes\n"})
	m := manifest(repo("good", good), repo("bad", bad))
	m.Execution.Command = sh(`echo more >> README.md`)
	m.Verifiers = []protocol.Verifier{{Name: "not-broken", Command: sh(`test ! -f broken`)}}
	res := run(t, o, m)
	if res.Status != protocol.PhaseComplete {
		t.Fatalf("phase %s, want complete when one repository succeeds", res.Status)
	}
	if g, b := repoResult(t, res, "good"), repoResult(t, res, "bad"); g.Status != "success" || b.Status != "failed" {
		t.Fatalf("good %s, bad %s", g.Status, b.Status)
	}
	if !left(o, "good") || left(o, "bad") {
		t.Fatal("only the good repository's change is left for the worker")
	}
}

func TestAgenticTransform(t *testing.T) {
	tests := []struct {
		name      string
		prompt    string
		limits    protocol.Limits
		verifiers []protocol.Verifier
		phase     protocol.Phase
		errorPart string
		attempts  int // "## iteration=0 attempt=N" entries in AGENT_LOG.md
	}{
		{
			name:      "verifier feedback makes the agent fix its work",
			prompt:    "Make the checks pass. fix-on-feedback",
			verifiers: []protocol.Verifier{{Name: "fixed", Command: []string{"test", "-f", "fixed.txt"}}},
			phase:     protocol.PhaseComplete,
			attempts:  2,
		},
		{
			name:      "retries run out",
			prompt:    "Try, but never fix anything.",
			limits:    protocol.Limits{MaxVerifierRetries: new(1)},
			verifiers: []protocol.Verifier{{Name: "fixed", Command: []string{"test", "-f", "fixed.txt"}}},
			phase:     protocol.PhaseFailed,
			errorPart: "verifiers still failing after 2 attempts",
			attempts:  2,
		},
		{
			name:      "no retries when the definition allows none",
			prompt:    "Make the checks pass. fix-on-feedback",
			limits:    protocol.Limits{MaxVerifierRetries: new(0)},
			verifiers: []protocol.Verifier{{Name: "fixed", Command: []string{"test", "-f", "fixed.txt"}}},
			phase:     protocol.PhaseFailed,
			errorPart: "verifiers still failing after 1 attempt",
			attempts:  1,
		},
		{
			name:      "an agent that changes nothing is stopped",
			prompt:    "do-nothing",
			limits:    protocol.Limits{MaxIterations: 10, MaxVerifierRetries: new(10)},
			verifiers: []protocol.Verifier{{Name: "fixed", Command: []string{"test", "-f", "fixed.txt"}}},
			phase:     protocol.PhaseFailed,
			errorPart: "agent made no progress in 3 iterations",
		},
		{
			name:      "agent exits with an error",
			prompt:    "fail-agent",
			phase:     protocol.PhaseFailed,
			errorPart: "agent exited with status 4",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := manifest(repo("svc", remote))
			m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: tt.prompt, Agent: "claude-code"}
			m.Limits = tt.limits
			m.Verifiers = tt.verifiers
			res := run(t, o, m)
			r := repoResult(t, res, "svc")
			if res.Status != tt.phase || !strings.Contains(r.Error, tt.errorPart) {
				t.Fatalf("phase %s, repository %s %q; want %s %q", res.Status, r.Status, r.Error, tt.phase, tt.errorPart)
			}
			if !strings.Contains(res.AgentOutput, "== svc ==") {
				t.Errorf("agent output not recorded: %q", res.AgentOutput)
			}
			if tt.attempts == 0 {
				return
			}
			log := diffOf(r, "AGENT_LOG.md")
			if log == nil {
				t.Fatal("the agent's edits are not in the diff")
			}
			if n := strings.Count(log.Diff, "+## iteration=0 attempt="); n != tt.attempts {
				t.Errorf("agent ran %d times, want %d:\n%s", n, tt.attempts, log.Diff)
			}
			if !strings.Contains(log.Diff, "+Before finishing, make sure these commands succeed in the repository:") ||
				!strings.Contains(log.Diff, "+- fixed: test -f fixed.txt") {
				t.Errorf("verifier instructions did not reach the agent:\n%s", log.Diff)
			}
			if got := strings.Contains(log.Diff, "+### fixed in svc: exit status 1"); got != (tt.attempts > 1) {
				t.Errorf("verifier feedback reached the agent: %v, want %v (after %d attempts):\n%s", got, tt.attempts > 1, tt.attempts, log.Diff)
			}
			if tt.phase == protocol.PhaseComplete {
				if _, commit := leftChange(t, o, remote, r); commit == "" {
					t.Error("no change left for the worker")
				}
				if len(r.VerifierResults) != 1 || !r.VerifierResults[0].Success {
					t.Errorf("verifier results %+v", r.VerifierResults)
				}
			}
		})
	}
}

func TestTransformationAndTargets(t *testing.T) {
	tests := []struct {
		name      string
		execution protocol.Execution
		want      string // appended to each target's README.md
	}{
		{
			name:      "agent runs once in the workspace",
			execution: protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "edit-targets"},
			want:      "edited by the agent",
		},
		{
			name: "command runs in each target with the recipe at hand",
			execution: protocol.Execution{Type: protocol.ExecutionDeterministic,
				Command: sh(`cat "$FLEETLIFT_TRANSFORMATION_DIR/recipe.txt" >> README.md`)},
			want: "from the recipe",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			parent := t.TempDir()
			recipe := gittest.NewRemote(t, parent, "recipe", map[string]string{"recipe.txt": "from the recipe\n"})
			api := gittest.NewRemote(t, parent, "api", map[string]string{"README.md": "# api\n"})
			web := gittest.NewRemote(t, parent, "web", map[string]string{"README.md": "# web\n"})
			m := manifest()
			tr := repo("recipe", recipe)
			m.Transformation = &tr
			m.Targets = []protocol.Repository{repo("api", api), repo("web", web)}
			m.Execution = tt.execution
			m.Verifiers = []protocol.Verifier{{Name: "changed", Command: []string{"grep", "-q", tt.want, "README.md"}}}
			res := run(t, o, m)
			if res.Status != protocol.PhaseComplete || len(res.Repositories) != 2 {
				t.Fatalf("phase %s (%s), results %+v", res.Status, res.Error, res.Repositories)
			}
			for name, remote := range map[string]string{"api": api, "web": web} {
				r := repoResult(t, res, name)
				if r.Status != "success" || len(r.VerifierResults) != 1 || !r.VerifierResults[0].Success {
					t.Fatalf("%s: %+v", name, r)
				}
				dir, commit := leftChange(t, o, remote, r)
				if commit == "" {
					t.Fatalf("%s: no change left for the worker", name)
				}
				if got := gittest.Run(t, dir, "show", commit+":README.md"); !strings.Contains(got, tt.want) {
					t.Errorf("%s: README.md left = %q", name, got)
				}
			}
			if _, err := os.Stat(filepath.Join(o.Workspace, protocol.Dir, protocol.BundleFile("recipe"))); err == nil {
				t.Error("a change was left in the transformation repository")
			}
		})
	}
}

// The transformation repository is the workspace, as seed 001 lays it out:
// the agent CLI starts where the recipe's .claude/skills, CLAUDE.md and
// bin/ are, with the targets under targets/, and the protocol directory
// still hidden from it. A recipe that would take the place of the
// protocol directory or of the targets is refused.
func TestRecipeAtTheWorkspaceRoot(t *testing.T) {
	recipeFiles := map[string]string{
		".claude/skills/classify/SKILL.md": "# classify\n",
		"CLAUDE.md":                        "Use the classify skill.\n",
		"bin/tool":                         "#!/bin/sh\necho tool\n",
	}
	tests := []struct {
		name    string
		extra   map[string]string // more files in the recipe
		wantErr string
	}{
		{name: "skills, CLAUDE.md and bin/ at the root, targets under targets/"},
		{name: "a recipe with its own targets/ is refused", extra: map[string]string{"targets/x": "x\n"},
			wantErr: "top-level targets, where the workspace keeps the target repositories"},
		{name: "a recipe with its own .fleetlift is refused", extra: map[string]string{".fleetlift/steering.json": "{}\n"},
			wantErr: "top-level .fleetlift, where the workspace keeps fleetlift's protocol files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			parent := t.TempDir()
			files := map[string]string{}
			for k, v := range recipeFiles {
				files[k] = v
			}
			for k, v := range tt.extra {
				files[k] = v
			}
			recipe := gittest.NewRemote(t, parent, "recipe", files)
			api := gittest.NewRemote(t, parent, "api", map[string]string{"README.md": "# api\n"})
			web := gittest.NewRemote(t, parent, "web", map[string]string{"README.md": "# web\n"})
			m := manifest()
			tr := repo("classification-tools", recipe)
			m.Transformation = &tr
			m.Targets = []protocol.Repository{repo("api", api), repo("web", web)}
			m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "check-recipe edit-targets"}
			res := run(t, o, m)
			if tt.wantErr != "" {
				if res.Status != protocol.PhaseFailed || !strings.Contains(res.Error, tt.wantErr) {
					t.Fatalf("phase %s %q, want failed: %s", res.Status, res.Error, tt.wantErr)
				}
				if _, err := os.Stat(filepath.Join(o.Workspace, "CLAUDE.md")); err == nil {
					t.Error("the refused recipe's files are in the workspace")
				}
				return
			}
			if res.Status != protocol.PhaseComplete {
				t.Fatalf("phase %s: %s\n%s", res.Status, res.Error, res.AgentOutput)
			}
			for name, remote := range map[string]string{"api": api, "web": web} {
				if got := leftFile(t, o, remote, res, name, "README.md"); !strings.Contains(got, "edited by the agent") {
					t.Errorf("%s: README.md left = %q", name, got)
				}
			}
			if got, err := os.ReadFile(filepath.Join(o.Workspace, "CLAUDE.md")); err != nil || string(got) != recipeFiles["CLAUDE.md"] {
				t.Errorf("CLAUDE.md at the workspace root: %q, %v", got, err)
			}
			// The recipe's git sees its own files: not the protocol
			// directory, not the targets.
			st := gittest.Run(t, o.Workspace, "status", "--porcelain", "--untracked-files=all")
			if strings.Contains(st, protocol.Dir) || strings.Contains(st, "targets/") {
				t.Errorf("git status in the workspace shows fleetlift's or the targets' files:\n%s", st)
			}
			if _, err := os.Stat(filepath.Join(o.Workspace, protocol.Dir, protocol.BundleFile("recipe"))); err == nil {
				t.Error("a change was left in the transformation repository")
			}
		})
	}
}

// TestAgentCLIUnderTmp: the agent CLI the operator configured runs in the
// jail though it lives in /tmp, which every jail makes private (a
// checkout under /tmp, a CLI unpacked there).
func TestAgentCLIUnderTmp(t *testing.T) {
	src, err := os.ReadFile(standIn(t))
	if err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(t.TempDir(), "stand-in-agent.sh")
	if err := os.WriteFile(cli, src, 0o755); err != nil {
		t.Fatal(err)
	}
	o := options(t)
	o.AgentCLI = []string{cli}
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	m := manifest(repo("svc", remote))
	m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "Make the checks pass. fix-on-feedback"}
	res := run(t, o, m)
	if r := repoResult(t, res, "svc"); res.Status != protocol.PhaseComplete || diffOf(r, "AGENT_LOG.md") == nil {
		t.Fatalf("phase %s, repository %s %q; want the agent from %s to have run and completed", res.Status, r.Status, r.Error, cli)
	}
}

// status.json is written at once for what the worker waits for (here the
// end) and otherwise only now and then: a task that passes through its
// phases quicker than that writes the file at most twice (its start, once
// that settled, and its end), not once per phase. Each write is a new file
// in the sandbox, and a read by the worker.
func TestStatusIsWrittenAtOnceOnlyForWhatTheWorkerWaitsFor(t *testing.T) {
	agent.SetStepEvery(t, time.Hour)
	origin := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	o := options(t)
	pdir := filepath.Join(o.Workspace, protocol.Dir)
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(pdir); err != nil {
		t.Fatal(err)
	}
	m := manifest(repo("svc", origin))
	m.Execution.Command = sh(`echo change >> README.md`)
	m.Verifiers = []protocol.Verifier{{Name: "ok", Command: []string{"true"}}}
	if res := run(t, o, m); res.Status != protocol.PhaseComplete {
		t.Fatalf("task ended %s: %s", res.Status, res.Error)
	}
	// The watcher hands on the kernel's events as they come; the run's
	// are all in once a second passes without one.
	writes := 0
	for done := false; !done; {
		select {
		case ev := <-w.Events:
			if filepath.Base(ev.Name) == protocol.StatusFile && ev.Has(fsnotify.Create) {
				writes++
			}
		case err := <-w.Errors:
			t.Fatal(err)
		case <-time.After(time.Second):
			done = true
		}
	}
	if writes < 1 || writes > 2 {
		t.Errorf("status.json was written %d times through initializing, executing, verifying, creating_prs and complete; want the end, and the start at most", writes)
	}
}

// A repository that names no branch is cloned at its default branch,
// whatever that is called, and its change builds on that branch's tip.
func TestTransformOnTheDefaultBranch(t *testing.T) {
	o := options(t)
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	gittest.Run(t, remote, "branch", "-m", "main", "trunk")
	gittest.Run(t, remote, "symbolic-ref", "HEAD", "refs/heads/trunk")
	trunk := remoteRef(t, remote, "refs/heads/trunk")
	m := manifest(protocol.Repository{Name: "svc", URL: remote})
	m.Execution.Command = sh(`echo change >> README.md`)
	res := run(t, o, m)
	if res.Status != protocol.PhaseComplete {
		t.Fatalf("phase %s (error %q)", res.Status, res.Error)
	}
	r := repoResult(t, res, "svc")
	if r.Status != "success" {
		t.Fatalf("repository %s %q", r.Status, r.Error)
	}
	if _, commit := leftChange(t, o, remote, r); commit == "" || r.Base != trunk {
		t.Errorf("the change %q builds on %s; want trunk's tip %s", commit, r.Base, trunk)
	}
}
