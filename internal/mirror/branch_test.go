package mirror_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/mirror"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/state"
)

const statusRef = "refs/heads/" + mirror.DefaultBranch

type fixture struct {
	ctx    context.Context
	remote string // the campaigns repository, as git sees it on disk
	b      *mirror.Branch
}

// newFixture makes a bare campaigns repository with a main branch and a
// mirror writing to it; url turns its path into what the mirror is given.
func newFixture(t *testing.T, url func(string) string) *fixture {
	t.Helper()
	remote := gittest.NewRemote(t, "", "campaigns", map[string]string{"campaigns/slog.yaml": "id: slog-rollout\n"})
	if url == nil {
		url = func(p string) string { return p }
	}
	return &fixture{
		ctx:    context.Background(),
		remote: remote,
		b:      &mirror.Branch{Git: &git.Git{Env: gittest.Env()}, Repository: url(remote), Watched: "main"},
	}
}

func (fx *fixture) write(t *testing.T, s reconcile.Status) {
	t.Helper()
	if err := fx.b.Write(fx.ctx, s); err != nil {
		t.Fatal(err)
	}
}

// refs lists every ref of the repository and what it points at.
func refs(t *testing.T, repo string) string {
	t.Helper()
	return gittest.Run(t, repo, "for-each-ref", "--format=%(refname) %(objectname)")
}

func rev(t *testing.T, repo, rev string) string {
	t.Helper()
	return gittest.Run(t, repo, "rev-parse", rev)
}

func commits(t *testing.T, repo string) int {
	t.Helper()
	var n int
	fmt.Sscan(gittest.Run(t, repo, "rev-list", "--count", statusRef), &n)
	return n
}

// files reads every file at ref the way a user would.
func files(t *testing.T, repo, ref string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range strings.Split(gittest.Run(t, repo, "ls-tree", "-r", "--name-only", ref), "\n") {
		out[p] = gittest.Run(t, repo, "show", ref+":"+p)
	}
	return out
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, fx *fixture)
	}{
		{"first write creates the branch with README, status.json and campaign pages", func(t *testing.T, fx *fixture) {
			main := rev(t, fx.remote, "refs/heads/main")
			fx.write(t, everything())
			got := files(t, fx.remote, statusRef)
			if len(got) != 11 {
				t.Errorf("files %v, want README.md, status.json and three campaign pages, each with its burndown's samples and chart", keys(got))
			}
			for path, want := range map[string][]string{
				"README.md": {
					"Revision `4d816c4e0b5a` of `main`",
					"| [`slog-rollout`](campaigns/slog-rollout.md) | Campaign | awaiting_approval | 2 | 1 / 1 / 4 | 1 open | 1 |",
					"commit this file as `approvals/slog-rollout__payments.yaml` to `main`",
					"result_digest: " + digest + "\ngeneration: 2\nby: <you>",
				},
				"campaigns/slog-rollout.md": {"| `api` | completed | `fleetlift/slog` | <" + apiPR + "> | open, approved, checks failure (ci/build), conflicting, pushed to by others |", "| `payments` | `main.go` | 10 | 4 |"},
				"campaigns/version-bump.md": {"| Phase | completed (suspended) |"},
			} {
				for _, w := range want {
					if !strings.Contains(got[path], w) {
						t.Errorf("%s lacks %q:\n%s", path, w, got[path])
					}
				}
			}
			var st struct {
				Revision  string           `json:"revision"`
				Time      time.Time        `json:"time"`
				Campaigns []state.Campaign `json:"campaigns"`
			}
			if err := json.Unmarshal([]byte(got["status.json"]), &st); err != nil {
				t.Fatalf("status.json: %v", err)
			}
			if st.Revision != revision || !st.Time.Equal(clock) || len(st.Campaigns) != 3 ||
				st.Campaigns[0].Repos[0].PullRequestURL != apiPR {
				t.Errorf("status.json = %+v", st)
			}
			if msg := gittest.Run(t, fx.remote, "log", "-1", "--format=%s", statusRef); msg != "fleetlift status at 4d816c4e0b5a: 3 campaigns, 1 awaiting approval" {
				t.Errorf("commit message %q", msg)
			}
			if n := commits(t, fx.remote); n != 1 {
				t.Errorf("%d status commits, want 1", n)
			}
			if now := rev(t, fx.remote, "refs/heads/main"); now != main {
				t.Errorf("main moved: %s -> %s", main, now)
			}
		}},
		{"no change makes no commit", func(t *testing.T, fx *fixture) {
			fx.write(t, everything())
			tip := rev(t, fx.remote, statusRef)
			fx.write(t, everything())
			later := everything()
			later.Time = clock.Add(time.Hour)
			fx.write(t, later)
			if now := rev(t, fx.remote, statusRef); now != tip {
				t.Errorf("status branch moved %s -> %s with nothing changed", tip, now)
			}
			if !strings.Contains(files(t, fx.remote, statusRef)["README.md"], "03:04:05 UTC") {
				t.Errorf("README.md no longer shows when the status last changed")
			}
		}},
		{"a changed status is a commit on top of the previous one", func(t *testing.T, fx *fixture) {
			fx.write(t, one())
			first := rev(t, fx.remote, statusRef)
			s := one()
			s.Time = clock.Add(time.Minute)
			s.Campaigns[0].Phase = state.PhaseCompleted
			s.Campaigns[0].Repos[0] = state.Repo{Name: "api", Status: state.RepoCompleted, PullRequestURL: apiPR, PullRequestState: state.PullRequestOpen}
			fx.write(t, s)
			if parent := rev(t, fx.remote, statusRef+"^"); parent != first {
				t.Errorf("parent %s, want the previous status %s", parent, first)
			}
			if n := commits(t, fx.remote); n != 2 {
				t.Errorf("%d status commits, want 2", n)
			}
			got := files(t, fx.remote, statusRef)
			if !strings.Contains(got["README.md"], "| Campaign | completed | 1 | 1 / 0 / 1 | 1 open | 0 |") ||
				!strings.Contains(got["README.md"], "03:05:05 UTC") {
				t.Errorf("README.md:\n%s", got["README.md"])
			}
		}},
		{"the burndown gains a sample when the counts change, and only then", func(t *testing.T, fx *fixture) {
			fx.write(t, one())
			s := one()
			s.Time = clock.Add(time.Hour)
			s.Campaigns[0].Repos = append(s.Campaigns[0].Repos, state.Repo{Name: "web", Status: state.RepoRunning})
			fx.write(t, s)
			s.Time = clock.Add(2 * time.Hour)
			s.Campaigns[0].Phase = state.PhaseCompleted
			s.Campaigns[0].Repos[0] = state.Repo{Name: "api", Status: state.RepoCompleted, PullRequestURL: apiPR, PullRequestState: state.PullRequestMerged}
			fx.write(t, s)
			same := s
			same.Time = clock.Add(3 * time.Hour)
			fx.write(t, same)
			got := files(t, fx.remote, statusRef)
			var samples []mirror.Sample
			if err := json.Unmarshal([]byte(got["campaigns/slog-rollout.burndown.json"]), &samples); err != nil {
				t.Fatal(err)
			}
			want := []mirror.Sample{{At: clock, ToDo: 1}, {At: clock.Add(time.Hour), ToDo: 2}, {At: clock.Add(2 * time.Hour), Merged: 1, ToDo: 1}}
			if len(samples) != len(want) {
				t.Fatalf("samples %+v, want %+v", samples, want)
			}
			for i := range want {
				if !samples[i].At.Equal(want[i].At) || samples[i].Merged != want[i].Merged || samples[i].ToDo != want[i].ToDo {
					t.Errorf("sample %d: %+v, want %+v", i, samples[i], want[i])
				}
			}
			svg := got["campaigns/slog-rollout.burndown.svg"]
			if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil || !strings.Contains(svg, ">merged 1<") || !strings.Contains(svg, ">to do 1<") {
				t.Errorf("chart (%v):\n%s", err, svg)
			}
			if !strings.Contains(got["campaigns/slog-rollout.md"], "(slog-rollout.burndown.svg)") {
				t.Errorf("the campaign's page does not show its burndown")
			}
			if n := commits(t, fx.remote); n != 3 {
				t.Errorf("%d status commits, want 3: the last write changed nothing", n)
			}
		}},
		{"a removed campaign loses its page", func(t *testing.T, fx *fixture) {
			fx.write(t, everything())
			s := everything()
			s.Campaigns = s.Campaigns[:1]
			fx.write(t, s)
			got := files(t, fx.remote, statusRef)
			if _, ok := got["campaigns/version-bump.md"]; ok {
				t.Errorf("page of a campaign no longer recorded is still there: %v", keys(got))
			}
			if strings.Contains(got["README.md"], "version-bump") {
				t.Errorf("README.md still lists the removed campaign")
			}
		}},
		{"status branch given as a full ref", func(t *testing.T, fx *fixture) {
			fx.b.Branch = "refs/heads/fleetlift/status"
			fx.write(t, one())
			if commits(t, fx.remote) != 1 {
				t.Errorf("no status commit on %s", statusRef)
			}
		}},
	}
	for _, tt := range tests {
		for _, fileURL := range []bool{false, true} {
			name := tt.name + "/path"
			var url func(string) string
			if fileURL {
				name = tt.name + "/file URL"
				url = func(p string) string { return "file://" + p }
			}
			t.Run(name, func(t *testing.T) { tt.run(t, newFixture(t, url)) })
		}
	}
}

// Pushing to a repository with a work tree leaves its checked-out branch
// and its files alone.
func TestWriteToARepositoryWithMainCheckedOut(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	gittest.Run(t, repo, "init", "--quiet")
	gittest.WriteFiles(t, repo, map[string]string{"campaigns/slog.yaml": "id: slog-rollout\n"})
	gittest.Run(t, repo, "add", "-A")
	gittest.Run(t, repo, "commit", "--quiet", "-m", "initial")
	main := rev(t, repo, "HEAD")

	b := &mirror.Branch{Git: &git.Git{Env: gittest.Env()}, Repository: repo, Watched: "main"}
	if err := b.Write(ctx, everything()); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Run(t, repo, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Errorf("HEAD is %s, want main", got)
	}
	if got := rev(t, repo, "refs/heads/main"); got != main {
		t.Errorf("main moved: %s -> %s", main, got)
	}
	if st := gittest.Run(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("work tree changed:\n%s", st)
	}
	if _, err := os.Stat(filepath.Join(repo, "README.md")); err == nil {
		t.Errorf("status files written into the work tree")
	}
	if !strings.Contains(gittest.Run(t, repo, "show", statusRef+":README.md"), "awaiting_approval") {
		t.Errorf("no status on %s", statusRef)
	}
}

func TestWriteRefusesTheWatchedBranch(t *testing.T) {
	tests := []struct {
		name            string
		branch, watched string
	}{
		{"status branch is the watched branch", "main", "main"},
		{"the same, as a full ref", "refs/heads/main", "main"},
		{"default branch watched", "", mirror.DefaultBranch},
		{"watched branch not set", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, nil)
			fx.b.Branch, fx.b.Watched = tt.branch, tt.watched
			before := refs(t, fx.remote)
			err := fx.b.Write(fx.ctx, everything())
			if !errors.Is(err, mirror.ErrWatchedBranch) {
				t.Fatalf("Write = %v, want ErrWatchedBranch", err)
			}
			t.Logf("error: %v", err)
			if after := refs(t, fx.remote); after != before {
				t.Errorf("refs changed:\n%s\nwant\n%s", after, before)
			}
		})
	}
	t.Run("invalid branch name", func(t *testing.T) {
		fx := newFixture(t, nil)
		fx.b.Branch = "status..branch"
		if err := fx.b.Write(fx.ctx, everything()); err == nil || errors.Is(err, mirror.ErrWatchedBranch) {
			t.Fatalf("Write = %v, want an invalid branch name", err)
		}
	})
}

// Every other ref stays where it was: the mirror pushes its branch only.
func TestWriteTouchesNoOtherRef(t *testing.T) {
	fx := newFixture(t, nil)
	gittest.Commit(t, fx.remote, "main", map[string]string{"approvals/x.yaml": "version: 1\n"})
	gittest.Run(t, fx.remote, "update-ref", "refs/heads/feature", "refs/heads/main~1")
	before := refs(t, fx.remote)
	fx.write(t, everything())
	after := refs(t, fx.remote)
	var added []string
	for _, line := range strings.Split(after, "\n") {
		if !strings.Contains(before, line) {
			added = append(added, line)
		}
	}
	if len(added) != 1 || !strings.HasPrefix(added[0], statusRef+" ") {
		t.Errorf("refs changed besides %s: %q", statusRef, added)
	}
	for _, line := range strings.Split(before, "\n") {
		if !strings.Contains(after, line) {
			t.Errorf("ref %s gone or moved", line)
		}
	}
}

func TestWriteNeverWritesCredentials(t *testing.T) {
	const secret = "tok_0123456789abcdef"
	s := everything()
	s.Campaigns[0].Repos[0].PullRequestURL = "https://x-access-token:" + secret + "@github.com/acme/api/pull/7"
	s.Campaigns[0].Spec = []byte(`{"repositories":[{"url":"https://bot:` + secret + `@github.com/acme/api.git"}]}`)
	s.Outcomes[0].Err = errors.New("push to https://bot:" + secret + "@example.com/acme/api.git: denied")
	s.Plan.Errors[0].Msg = "cannot clone https://" + secret + "@example.com/x.git"

	fx := newFixture(t, nil)
	fx.write(t, s)
	got := files(t, fx.remote, statusRef)
	for path, content := range got {
		if strings.Contains(content, secret) {
			t.Errorf("%s contains the token:\n%s", path, content)
		}
	}
	if !strings.Contains(got["campaigns/slog-rollout.md"], "https://REDACTED@github.com/acme/api/pull/7") {
		t.Errorf("campaign page does not show the redacted pull request URL:\n%s", got["campaigns/slog-rollout.md"])
	}
	if !strings.Contains(got["README.md"], "push to https://REDACTED@example.com/acme/api.git: denied") {
		t.Errorf("README.md does not show the redacted error:\n%s", got["README.md"])
	}
	if log := gittest.Run(t, fx.remote, "log", "--format=%B", statusRef); strings.Contains(log, secret) {
		t.Errorf("commit message contains the token: %s", log)
	}
}

// racingGit is a git that, just before its i-th push, moves the status
// branch of remote to moves[i], as another writer would; it logs every
// push to the file it returns.
func racingGit(t *testing.T, remote string, moves ...string) (bin, pushes string) {
	t.Helper()
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pushes = filepath.Join(dir, "pushes")
	var cases strings.Builder
	for i, m := range moves {
		fmt.Fprintf(&cases, "\t\t%d) %q --git-dir=%q update-ref %q %q || exit 99 ;;\n", i+1, realGit, remote, statusRef, m)
	}
	script := fmt.Sprintf(`#!/bin/sh
for a in "$@"; do
	if [ "$a" = push ]; then
		echo push >> %[1]q
		case $(wc -l < %[1]q | tr -d ' ') in
%[2]s		esac
		break
	fi
done
exec %[3]q "$@"
`, pushes, cases.String(), realGit)
	bin = filepath.Join(dir, "git")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, pushes
}

// Another writer (a second reconciler) pushes the status branch between
// the mirror's read and its push: the lease fails, and the mirror builds
// on the other writer's commit instead of overwriting it.
func TestWriteRetriesWhenTheBranchMoved(t *testing.T) {
	// setup writes a first status and another writer's status on top of
	// it, then puts the branch back on the first: the other writer's
	// commit is ready to appear at push time.
	setup := func(t *testing.T) (fx *fixture, first, theirs string) {
		fx = newFixture(t, nil)
		fx.write(t, one())
		first = rev(t, fx.remote, statusRef)
		other := one()
		other.Campaigns[0].Phase = state.PhasePaused
		fx.write(t, other)
		theirs = rev(t, fx.remote, statusRef)
		gittest.Run(t, fx.remote, "update-ref", statusRef, first)
		return fx, first, theirs
	}

	t.Run("moved once: the retry builds on the other commit", func(t *testing.T) {
		fx, first, theirs := setup(t)
		bin, pushes := racingGit(t, fx.remote, theirs)
		fx.b.Git = &git.Git{Binary: bin, Env: gittest.Env()}
		fx.write(t, everything())

		if parent := rev(t, fx.remote, statusRef+"^"); parent != theirs {
			t.Errorf("status commit's parent is %s, want the other writer's %s", parent, theirs)
		}
		if got := rev(t, fx.remote, statusRef+"^^"); got != first {
			t.Errorf("history lost: %s^^ is %s, want %s", statusRef, got, first)
		}
		if !strings.Contains(files(t, fx.remote, statusRef)["README.md"], "awaiting_approval") {
			t.Errorf("status branch does not hold the status written")
		}
		log, _ := os.ReadFile(pushes)
		if n := strings.Count(string(log), "push"); n != 2 {
			t.Errorf("%d pushes, want 2 (one lost lease, one retry)", n)
		}
	})

	t.Run("moved again: an error, and nothing overwritten", func(t *testing.T) {
		fx, first, theirs := setup(t)
		bin, pushes := racingGit(t, fx.remote, theirs, first)
		fx.b.Git = &git.Git{Binary: bin, Env: gittest.Env()}
		err := fx.b.Write(fx.ctx, everything())
		if err == nil || !strings.Contains(err.Error(), "moved") {
			t.Fatalf("Write = %v, want an error saying the branch moved", err)
		}
		t.Logf("error: %v", err)
		if got := rev(t, fx.remote, statusRef); got != first {
			t.Errorf("status branch at %s, want %s where the other writer left it", got, first)
		}
		log, _ := os.ReadFile(pushes)
		if n := strings.Count(string(log), "push"); n != 2 {
			t.Errorf("%d pushes, want 2 (one retry only)", n)
		}
	})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
