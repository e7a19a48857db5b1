package giteatest_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
)

// delivery is one webhook request Gitea sent.
type delivery struct {
	header http.Header
	body   []byte
}

// hookReceiver is a loopback server that records webhook deliveries.
func hookReceiver(t *testing.T) (*httptest.Server, <-chan delivery) {
	t.Helper()
	ch := make(chan delivery, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ch <- delivery{header: r.Header.Clone(), body: b}
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

// await returns the next delivery whose X-Gitea-Event-Type is eventType,
// skipping others.
func await(t *testing.T, ch <-chan delivery, eventType string) delivery {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case d := <-ch:
			t.Logf("webhook: X-Gitea-Event=%q X-Gitea-Event-Type=%q", d.header.Get("X-Gitea-Event"), d.header.Get("X-Gitea-Event-Type"))
			if d.header.Get("X-Gitea-Event-Type") == eventType {
				return d
			}
		case <-timeout:
			t.Fatalf("no %s webhook delivery within 20s", eventType)
		}
	}
}

// checkSigned asserts the delivery carries Gitea's headers and that
// X-Gitea-Signature is the hex HMAC-SHA256 of the body under secret.
func checkSigned(t *testing.T, d delivery, secret, event string) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(d.body)
	want := hex.EncodeToString(mac.Sum(nil))
	if got := d.header.Get("X-Gitea-Signature"); got != want {
		t.Errorf("%s: X-Gitea-Signature = %q, want %q", event, got, want)
	}
	if got := d.header.Get("X-Hub-Signature-256"); got != "sha256="+want {
		t.Errorf("%s: X-Hub-Signature-256 = %q, want sha256=%s", event, got, want)
	}
	if d.header.Get("X-Gitea-Delivery") == "" {
		t.Errorf("%s: no X-Gitea-Delivery", event)
	}
	if got := d.header.Get("X-Gitea-Event"); got != event {
		t.Errorf("X-Gitea-Event = %q, want %q", got, event)
	}
	if got := d.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("%s: Content-Type = %q, want application/json", event, got)
	}
}

type review struct {
	ID    int64  `json:"id"`
	State string `json:"state"`
	Body  string `json:"body"`
	User  struct {
		Login string `json:"login"`
	} `json:"user"`
	CommitID    string    `json:"commit_id"`
	Stale       bool      `json:"stale"`
	Official    bool      `json:"official"`
	Dismissed   bool      `json:"dismissed"`
	SubmittedAt time.Time `json:"submitted_at"`
}

// TestPullRequestReviewsAndWebhooks walks the path an approval pull
// request takes on Gitea: push over HTTP with a token, open a pull
// request, review it as another user, read the reviews back, and receive
// signed webhooks for each step. It pins the names and states the gitea
// forge adapter has to normalise.
func TestPullRequestReviewsAndWebhooks(t *testing.T) {
	s := giteatest.Start(t)

	alice := s.CreateUser(t, "alice")
	bob := s.CreateUser(t, "bob")
	if alice.Token == "" || bob.Token == "" {
		t.Fatal("CreateUser returned no token")
	}
	cloneURL := s.CreateRepo(t, "alice", "target", false)
	if want := s.CloneURL("alice", "target"); cloneURL != want {
		t.Errorf("clone URL = %q, want %q", cloneURL, want)
	}
	s.AddCollaborator(t, "alice", "target", "bob", "write")

	const secret = "hook-secret"
	hooks, deliveries := hookReceiver(t)
	s.Do(t, alice.Token, http.MethodPost, "repos/alice/target/hooks", map[string]any{
		"type":   "gitea",
		"active": true,
		"events": []string{"push", "pull_request"},
		"config": map[string]string{"url": hooks.URL, "content_type": "json", "secret": secret},
	}, nil)

	// Push main, then a branch, over HTTP with alice's token.
	work := t.TempDir()
	s.Git(t, alice, work, "init", "-q")
	write(t, filepath.Join(work, "README.md"), "# target\n")
	s.Git(t, alice, work, "add", ".")
	s.Git(t, alice, work, "commit", "-q", "-m", "initial")
	s.Git(t, alice, work, "push", "-q", cloneURL, "HEAD:refs/heads/main")

	push := await(t, deliveries, "push")
	checkSigned(t, push, secret, "push")
	var pushed struct {
		Ref    string `json:"ref"`
		Pusher struct {
			Login string `json:"login"`
		} `json:"pusher"`
	}
	if err := json.Unmarshal(push.body, &pushed); err != nil {
		t.Fatal(err)
	}
	if pushed.Ref != "refs/heads/main" || pushed.Pusher.Login != "alice" {
		t.Errorf("push payload ref=%q pusher=%q, want refs/heads/main by alice", pushed.Ref, pushed.Pusher.Login)
	}

	s.Git(t, alice, work, "checkout", "-q", "-b", "fleetlift/change")
	write(t, filepath.Join(work, "change.txt"), "changed\n")
	s.Git(t, alice, work, "add", ".")
	s.Git(t, alice, work, "commit", "-q", "-m", "change")
	s.Git(t, alice, work, "push", "-q", cloneURL, "HEAD:refs/heads/fleetlift/change")
	head := strings.TrimSpace(s.Git(t, alice, work, "rev-parse", "HEAD"))
	await(t, deliveries, "push")

	var pr struct {
		Number int    `json:"number"`
		State  string `json:"state"`
		Head   struct {
			SHA string `json:"sha"`
			Ref string `json:"ref"`
		} `json:"head"`
	}
	s.Do(t, alice.Token, http.MethodPost, "repos/alice/target/pulls", map[string]any{
		"head": "fleetlift/change", "base": "main", "title": "Change", "body": "Proposed by fleetlift.",
	}, &pr)
	if pr.Number != 1 || pr.State != "open" || pr.Head.SHA != head {
		t.Errorf("pull request = #%d %s at %s, want #1 open at %s", pr.Number, pr.State, pr.Head.SHA, head)
	}
	opened := await(t, deliveries, "pull_request")
	checkSigned(t, opened, secret, "pull_request")
	var openedPayload struct {
		Action string `json:"action"`
	}
	if err := json.Unmarshal(opened.body, &openedPayload); err != nil {
		t.Fatal(err)
	}
	if openedPayload.Action != "opened" {
		t.Errorf("pull_request action = %q, want opened", openedPayload.Action)
	}

	// bob approves, then requests changes with a body. Gitea's API takes
	// the events APPROVED and REQUEST_CHANGES.
	s.Do(t, bob.Token, http.MethodPost, "repos/alice/target/pulls/1/reviews",
		map[string]any{"event": "APPROVED", "body": "Looks good."}, nil)
	approved := await(t, deliveries, "pull_request_review_approved")
	checkSigned(t, approved, secret, "pull_request_approved")

	s.Do(t, bob.Token, http.MethodPost, "repos/alice/target/pulls/1/reviews",
		map[string]any{"event": "REQUEST_CHANGES", "body": "Please rename the file."}, nil)
	rejected := await(t, deliveries, "pull_request_review_rejected")
	checkSigned(t, rejected, secret, "pull_request_rejected")
	var rejectedPayload struct {
		Action string `json:"action"`
		Review struct {
			Type    string `json:"type"`
			Content string `json:"content"`
		} `json:"review"`
		Sender struct {
			Login string `json:"login"`
		} `json:"sender"`
	}
	if err := json.Unmarshal(rejected.body, &rejectedPayload); err != nil {
		t.Fatal(err)
	}
	if rejectedPayload.Review.Type != "pull_request_review_rejected" ||
		rejectedPayload.Review.Content != "Please rename the file." ||
		rejectedPayload.Sender.Login != "bob" {
		t.Errorf("pull_request_rejected payload: action=%q review=%+v sender=%q",
			rejectedPayload.Action, rejectedPayload.Review, rejectedPayload.Sender.Login)
	}

	// A plain comment review: Gitea's event COMMENT, state COMMENT.
	s.Do(t, bob.Token, http.MethodPost, "repos/alice/target/pulls/1/reviews",
		map[string]any{"event": "COMMENT", "body": "One more thought."}, nil)
	commented := await(t, deliveries, "pull_request_review_comment")
	checkSigned(t, commented, secret, "pull_request_comment")

	var raw json.RawMessage
	s.Do(t, alice.Token, http.MethodGet, "repos/alice/target/pulls/1/reviews", nil, &raw)
	t.Logf("reviews: %s", raw)
	var reviews []review
	if err := json.Unmarshal(raw, &reviews); err != nil {
		t.Fatal(err)
	}
	// Gitea names the states APPROVED, REQUEST_CHANGES and COMMENT
	// (GitHub: APPROVED, CHANGES_REQUESTED, COMMENTED). A reviewer's new
	// approve or request-changes review leaves the earlier ones in the
	// list with their state but dismissed and no longer official; a
	// comment review dismisses nothing. The forge adapter normalises this.
	want := []struct {
		state, body         string
		dismissed, official bool
	}{
		{"APPROVED", "Looks good.", true, false},
		{"REQUEST_CHANGES", "Please rename the file.", false, true},
		{"COMMENT", "One more thought.", false, false},
	}
	if len(reviews) != len(want) {
		t.Fatalf("got %d reviews, want %d: %s", len(reviews), len(want), raw)
	}
	for i, w := range want {
		r := reviews[i]
		if r.State != w.state || r.Body != w.body || r.User.Login != "bob" || r.CommitID != head || r.SubmittedAt.IsZero() {
			t.Errorf("review %d = %+v, want %s %q by bob on %s", i, r, w.state, w.body, head)
		}
		if r.Dismissed != w.dismissed || r.Official != w.official || r.Stale {
			t.Errorf("review %d (%s): dismissed=%v official=%v stale=%v, want dismissed=%v official=%v stale=false",
				i, r.State, r.Dismissed, r.Official, r.Stale, w.dismissed, w.official)
		}
	}
}

// TestOrgTeamMembership covers the helpers approver-team tests use, and a
// repository owned by an organisation.
func TestOrgTeamMembership(t *testing.T) {
	s := giteatest.Start(t)
	carol := s.CreateUser(t, "carol")
	s.CreateUser(t, "dave")
	s.CreateOrg(t, "platform")
	id := s.CreateTeam(t, "platform", "approvers", "write")
	s.AddTeamMember(t, "platform", "approvers", "carol")

	var members []struct {
		Login string `json:"login"`
	}
	s.Do(t, s.AdminToken(), http.MethodGet, "teams/"+strconv.FormatInt(id, 10)+"/members", nil, &members)
	if len(members) != 1 || members[0].Login != "carol" {
		t.Errorf("approvers = %+v, want only carol", members)
	}

	cloneURL := s.CreateRepo(t, "platform", "campaigns", true)
	if want := s.CloneURL("platform", "campaigns"); cloneURL != want {
		t.Errorf("clone URL = %q, want %q", cloneURL, want)
	}
	// The auto-initialised repository has a commit on main.
	dir := filepath.Join(t.TempDir(), "campaigns")
	s.Git(t, carol, filepath.Dir(dir), "clone", "-q", cloneURL, dir)
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Errorf("auto-initialised repository has no README.md: %v", err)
	}
	if branch := strings.TrimSpace(s.Git(t, carol, dir, "branch", "--show-current")); branch != "main" {
		t.Errorf("default branch = %q, want main", branch)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLaunchSetsThePageCap: a Gitea launched with MaxResponseItems answers
// a listing with at most that many items per page, whatever the client
// asks for, as a program that reads only the first page relies on (and
// Launch leaves Gitea running for its caller until Close).
func TestLaunchSetsThePageCap(t *testing.T) {
	g, err := giteatest.Launch(giteatest.Options{Dir: t.TempDir(), MaxResponseItems: 2})
	if g != nil {
		t.Cleanup(g.Close)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, org := range []string{"cap-a", "cap-b", "cap-c"} {
		if err := g.Call(g.AdminToken(), http.MethodPost, "orgs", map[string]any{"username": org, "visibility": "public"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var orgs []struct {
		Name string `json:"username"`
	}
	if err := g.Call(g.AdminToken(), http.MethodGet, "orgs?limit=10", nil, &orgs); err != nil {
		t.Fatal(err)
	}
	if len(orgs) != 2 {
		t.Fatalf("a page of %d organisations, want the cap of 2: %+v", len(orgs), orgs)
	}
	g.Close()
	if g.Pid() != 0 {
		t.Errorf("Pid %d after Close, want 0", g.Pid())
	}
}
