package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKeepCurrentOnTheLocalForge is issue 40's keep_current: after a
// campaign opened three pull requests, main moves under them. svc0's
// base gets a conflicting change: keep_current: conflicted has its
// change made again on the new base, with no command. svc1's does too,
// but a person had pushed to its branch: it is left as it is, and prs
// says why. svc2's base moves without conflict: it is left until
// `prs update --repository svc2` makes it again.
func TestKeepCurrentOnTheLocalForge(t *testing.T) {
	urls, flags, _ := followedCampaign(t, "current", "s/^go 1[.][0-9]*$/go 1.26/", "keep_current: conflicted", 3)
	bare := func(i int) string { return strings.TrimPrefix(urls[i], "file://") }
	const branch = "auto/current/current"
	hers := func() string { return gitOut(t, bare(1), "rev-parse", "refs/heads/"+branch) }
	work := t.TempDir()
	gitScript(t, fmt.Sprintf(`
# svc1: a person pushes a commit of their own to the branch.
git clone -q -b %[4]s %[2]s %[5]s/svc1-branch
printf 'by hand\n' > %[5]s/svc1-branch/NOTES
git -C %[5]s/svc1-branch add NOTES
git -C %[5]s/svc1-branch -c user.email=p@example.com -c user.name=p commit -qm notes
git -C %[5]s/svc1-branch push -q origin %[4]s
# svc0 and svc1: main moves to go 1.22, which conflicts with go 1.26.
for r in %[1]s %[2]s; do
  d=%[5]s/$(basename $r)
  git clone -q $r $d
  printf 'module example.com/svc\n\ngo 1.22\n' > $d/go.mod
  git -C $d -c user.email=p@example.com -c user.name=p commit -qam "go 1.22"
  git -C $d push -q origin main
done
# svc2: main moves without conflict.
git clone -q %[3]s %[5]s/svc2
printf 'hello\n' > %[5]s/svc2/README
git -C %[5]s/svc2 add README
git -C %[5]s/svc2 -c user.email=p@example.com -c user.name=p commit -qm readme
git -C %[5]s/svc2 push -q origin main
`, bare(0), bare(1), bare(2), branch, work))
	handPushed := hers()

	// The worker reads svc0 conflicting and has its change made again
	// on the new main, by itself.
	onMain := func(i int) bool {
		main := gitOut(t, bare(i), "rev-parse", "refs/heads/main")
		parent := gitOut(t, bare(i), "rev-parse", "refs/heads/"+branch+"^")
		return parent == main
	}
	for deadline := time.Now().Add(90 * time.Second); !onMain(0); time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("svc0's change was not made again on its new base:\n%s", gitOut(t, bare(0), "log", "--oneline", "--all"))
		}
	}
	if got := gitOut(t, bare(0), "show", branch+":go.mod"); !strings.Contains(got, "go 1.26") {
		t.Errorf("svc0's branch holds %q, want the change made again", got)
	}
	if got := hers(); got != handPushed {
		t.Errorf("svc1's branch moved from the person's %s to %s", handPushed, got)
	}
	if onMain(2) {
		t.Errorf("svc2, only behind, was made again under keep_current: conflicted")
	}

	got := prsJSON(t, append([]string{"current", "--refresh"}, flags...)...)
	for _, p := range got.PullRequests {
		switch p.Repository {
		case "svc0":
			if p.State != "open" || p.Mergeable != "mergeable" || p.PushedByOthers {
				t.Errorf("svc0 after it was made again: %+v", p)
			}
		case "svc1":
			if !p.PushedByOthers || p.Mergeable != "conflicting" || !strings.Contains(p.KeepCurrent, "someone else pushed") {
				t.Errorf("svc1: %+v, want it left alone and saying why", p)
			}
		case "svc2":
			if p.Mergeable != "behind" {
				t.Errorf("svc2: %+v", p)
			}
		}
	}

	// By command: svc2 is made again; svc1 is still refused.
	out, code := runCLI(t, append([]string{"prs", "update", "current", "--repository", "svc2", "--repository", "svc1"}, flags...)...)
	if code != 0 || !strings.Contains(out, "update: 1 queued, 1 skipped") || !strings.Contains(out, "someone else pushed") {
		t.Fatalf("prs update: exit %d\n%s", code, out)
	}
	for deadline := time.Now().Add(90 * time.Second); !onMain(2); time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("svc2's change was not made again:\n%s", gitOut(t, bare(2), "log", "--oneline", "--all"))
		}
	}
	if got := hers(); got != handPushed {
		t.Errorf("svc1's branch moved from the person's %s to %s", handPushed, got)
	}
}
