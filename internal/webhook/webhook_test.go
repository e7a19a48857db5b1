package webhook_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/webhook"
)

var secret = []byte("s3cret-shared-with-the-forge")

const (
	sha1 = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
	sha2 = "0123456789abcdef0123456789abcdef01234567"
)

// watched are the repositories the test handlers accept, in two of the
// forms an operator may write them.
var watched = []string{
	"https://github.com/acme/campaigns.git",
	"git@gitea.example:acme/campaigns.git",
}

// hints records the hints a Handler gives.
type hints struct {
	mu     sync.Mutex
	events []webhook.Event
}

func (h *hints) hint(e webhook.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *hints) got() []webhook.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]webhook.Event(nil), h.events...)
}

func newHandler(t *testing.T, opts ...func(*webhook.Options)) (*webhook.Handler, *hints) {
	t.Helper()
	rec := &hints{}
	o := webhook.Options{Secret: secret, Repos: watched, Hint: rec.hint}
	for _, f := range opts {
		f(&o)
	}
	h, err := webhook.New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h, rec
}

func githubRepo(fullName string) string {
	return fmt.Sprintf(`{"id":1,"full_name":%q,"html_url":"https://github.com/%[1]s",`+
		`"clone_url":"https://github.com/%[1]s.git","ssh_url":"git@github.com:%[1]s.git",`+
		`"git_url":"git://github.com/%[1]s.git","url":"https://api.github.com/repos/%[1]s"}`, fullName)
}

func giteaRepo(fullName string) string {
	return fmt.Sprintf(`{"id":7,"full_name":%q,"html_url":"https://gitea.example:3000/%[1]s",`+
		`"clone_url":"https://gitea.example:3000/%[1]s.git","ssh_url":"ssh://git@gitea.example:2222/%[1]s.git"}`, fullName)
}

func pushBody(repo string) []byte {
	return []byte(`{"ref":"refs/heads/main","before":"` + sha2 + `","after":"` + sha1 +
		`","commits":[{"id":"` + sha1 + `","message":"add campaign"}],"repository":` + repo + `}`)
}

func pullRequestBody(repo string, number int) []byte {
	return []byte(fmt.Sprintf(`{"action":"synchronize","number":%d,"pull_request":{"number":%[1]d,"head":{"sha":%q}},"repository":%s}`,
		number, sha1, repo))
}

// reviewBody has the number only inside pull_request, as GitHub's
// pull_request_review event does.
func reviewBody(repo string, number int) []byte {
	return []byte(fmt.Sprintf(`{"action":"submitted","review":{"state":"approved"},"pull_request":{"number":%d},"repository":%s}`,
		number, repo))
}

// githubRequest is a delivery as GitHub sends it, signed with secret.
func githubRequest(event, delivery string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "GitHub-Hookshot/abc123")
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Delivery", delivery)
	r.Header.Set("X-Hub-Signature-256", "sha256="+webhook.Sign(secret, body))
	return r
}

// giteaRequest is a delivery as Gitea sends it: its own headers and
// GitHub's, both signatures.
func giteaRequest(event, eventType, delivery string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(body))
	sig := webhook.Sign(secret, body)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Gitea-Delivery", delivery)
	r.Header.Set("X-Gitea-Event", event)
	r.Header.Set("X-Gitea-Event-Type", eventType)
	r.Header.Set("X-Gitea-Signature", sig)
	r.Header.Set("X-Gogs-Event", event)
	r.Header.Set("X-Hub-Signature-256", "sha256="+sig)
	r.Header.Set("X-GitHub-Delivery", delivery)
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Event-Type", eventType)
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func wantResponse(t *testing.T, w *httptest.ResponseRecorder, code int, body string) {
	t.Helper()
	if w.Code != code || strings.TrimSpace(w.Body.String()) != body {
		t.Fatalf("response = %d %q, want %d %q", w.Code, strings.TrimSpace(w.Body.String()), code, body)
	}
}

func wantHints(t *testing.T, rec *hints, n int) []webhook.Event {
	t.Helper()
	got := rec.got()
	if len(got) != n {
		t.Fatalf("got %d hints %+v, want %d", len(got), got, n)
	}
	return got
}

func TestGitHubPush(t *testing.T) {
	h, rec := newHandler(t)
	w := serve(h, githubRequest("push", "d-1", pushBody(githubRepo("acme/campaigns"))))
	wantResponse(t, w, http.StatusAccepted, "accepted")
	got := wantHints(t, rec, 1)[0]
	want := webhook.Event{
		Source:     webhook.GitHub,
		Kind:       webhook.Push,
		DeliveryID: "d-1",
		Repository: "acme/campaigns",
		CloneURL:   "https://github.com/acme/campaigns.git",
		Key:        "github.com/acme/campaigns",
		Watched:    true,
		Ref:        "refs/heads/main",
		After:      sha1,
	}
	if got != want {
		t.Fatalf("hint = %+v, want %+v", got, want)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want text/plain", ct)
	}
}

func TestGitHubFormPush(t *testing.T) {
	h, rec := newHandler(t)
	body := []byte(url.Values{"payload": {string(pushBody(githubRepo("acme/campaigns")))}}.Encode())
	r := githubRequest("push", "d-form", body)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	wantResponse(t, serve(h, r), http.StatusAccepted, "accepted")
	if got := wantHints(t, rec, 1)[0]; got.Kind != webhook.Push || got.After != sha1 {
		t.Fatalf("hint = %+v, want a push to %s", got, sha1)
	}
}

func TestGiteaPush(t *testing.T) {
	h, rec := newHandler(t)
	w := serve(h, giteaRequest("push", "push", "6c4a-uuid", pushBody(giteaRepo("acme/campaigns"))))
	wantResponse(t, w, http.StatusAccepted, "accepted")
	got := wantHints(t, rec, 1)[0]
	want := webhook.Event{
		Source:     webhook.Gitea,
		Kind:       webhook.Push,
		DeliveryID: "6c4a-uuid",
		Repository: "acme/campaigns",
		CloneURL:   "https://gitea.example:3000/acme/campaigns.git",
		Key:        "gitea.example/acme/campaigns",
		Watched:    true,
		Ref:        "refs/heads/main",
		After:      sha1,
	}
	if got != want {
		t.Fatalf("hint = %+v, want %+v", got, want)
	}
}

func TestGiteaReviewApproved(t *testing.T) {
	h, rec := newHandler(t)
	body := pullRequestBody(giteaRepo("acme/campaigns"), 42)
	w := serve(h, giteaRequest("pull_request_approved", "pull_request_review_approved", "r-1", body))
	wantResponse(t, w, http.StatusAccepted, "accepted")
	got := wantHints(t, rec, 1)[0]
	if got.Source != webhook.Gitea || got.Kind != webhook.Review || got.PullRequest != 42 || got.Repository != "acme/campaigns" {
		t.Fatalf("hint = %+v, want a Gitea review of #42 in acme/campaigns", got)
	}
}

func TestEventKinds(t *testing.T) {
	gh, gt := githubRepo("acme/campaigns"), giteaRepo("acme/campaigns")
	tests := []struct {
		name string
		req  *http.Request
		kind webhook.Kind // 0: ignored
		pr   int
	}{
		{"github pull_request", githubRequest("pull_request", "k", pullRequestBody(gh, 7)), webhook.PullRequest, 7},
		{"github pull_request_review", githubRequest("pull_request_review", "k", reviewBody(gh, 8)), webhook.Review, 8},
		{"github pull_request_review_comment", githubRequest("pull_request_review_comment", "k", reviewBody(gh, 9)), webhook.Review, 9},
		{"github status on the campaigns repository ignored", githubRequest("status", "k", statusBody(gh)), 0, 0},
		{"github issues ignored", githubRequest("issues", "k", []byte(`{"action":"opened"}`)), 0, 0},
		{"github release ignored", githubRequest("release", "k", []byte(`{}`)), 0, 0},
		{"gitea pull_request_sync", giteaRequest("pull_request", "pull_request_sync", "k", pullRequestBody(gt, 3)), webhook.PullRequest, 3},
		{"gitea review requested", giteaRequest("pull_request", "pull_request_review_request", "k", pullRequestBody(gt, 3)), webhook.PullRequest, 3},
		{"gitea review rejected", giteaRequest("pull_request_rejected", "pull_request_review_rejected", "k", pullRequestBody(gt, 4)), webhook.Review, 4},
		{"gitea review comment", giteaRequest("pull_request_comment", "pull_request_review_comment", "k", pullRequestBody(gt, 5)), webhook.Review, 5},
		{"gitea conversation comment ignored", giteaRequest("issue_comment", "pull_request_comment", "k", pullRequestBody(gt, 5)), 0, 0},
		{"gitea issues ignored", giteaRequest("issues", "issues", "k", []byte(`{}`)), 0, 0},
		{"old gitea without event type", func() *http.Request {
			r := giteaRequest("pull_request_approved", "", "k", pullRequestBody(gt, 6))
			r.Header.Del("X-Gitea-Event-Type")
			return r
		}(), webhook.Review, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, rec := newHandler(t)
			w := serve(h, tt.req)
			if tt.kind == 0 {
				wantResponse(t, w, http.StatusAccepted, "event ignored")
				wantHints(t, rec, 0)
				return
			}
			wantResponse(t, w, http.StatusAccepted, "accepted")
			if got := wantHints(t, rec, 1)[0]; got.Kind != tt.kind || got.PullRequest != tt.pr {
				t.Fatalf("hint = %+v, want %v of #%d", got, tt.kind, tt.pr)
			}
		})
	}
}

func statusBody(repo string) []byte {
	return []byte(`{"id":1,"sha":"` + sha1 + `","state":"success","context":"ci","repository":` + repo + `}`)
}

func checkBody(check, repo string) []byte {
	return []byte(`{"action":"completed","` + check + `":{"head_sha":"` + sha1 + `","status":"completed","conclusion":"failure",` +
		`"pull_requests":[{"number":3}]},"repository":` + repo + `}`)
}

// TestFollowedRepositories: with Options.Followed, events for the
// target repositories of campaigns are hints that say so, commit
// statuses and checks among them; events for a repository neither
// watched nor followed are ignored, not refused, since the followed
// ones change with the campaigns.
func TestFollowedRepositories(t *testing.T) {
	var asked []string
	followed := func(o *webhook.Options) {
		o.Followed = func(key string) bool {
			asked = append(asked, key)
			return key == "github.com/acme/api" || key == "gitea.example/acme/web"
		}
	}
	api, web := githubRepo("Acme/API"), giteaRepo("acme/web")
	tests := []struct {
		name string
		req  *http.Request
		kind webhook.Kind
		key  string
		pr   int
	}{
		{"github status", githubRequest("status", "s1", statusBody(api)), webhook.Status, "github.com/acme/api", 0},
		{"github check_run", githubRequest("check_run", "s2", checkBody("check_run", api)), webhook.Status, "github.com/acme/api", 0},
		{"github check_suite", githubRequest("check_suite", "s3", checkBody("check_suite", api)), webhook.Status, "github.com/acme/api", 0},
		{"github pull_request", githubRequest("pull_request", "s4", pullRequestBody(api, 7)), webhook.PullRequest, "github.com/acme/api", 7},
		{"github push to the base", githubRequest("push", "s5", pushBody(api)), webhook.Push, "github.com/acme/api", 0},
		{"gitea status", giteaRequest("status", "status", "s6", statusBody(web)), webhook.Status, "gitea.example/acme/web", 0},
		{"gitea review", giteaRequest("pull_request_approved", "pull_request_review_approved", "s7", reviewBody(web, 2)), webhook.Review, "gitea.example/acme/web", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, rec := newHandler(t, followed)
			wantResponse(t, serve(h, tt.req), http.StatusAccepted, "accepted")
			got := wantHints(t, rec, 1)[0]
			if got.Kind != tt.kind || got.Key != tt.key || !got.Followed || got.Watched || got.PullRequest != tt.pr {
				t.Fatalf("hint = %+v, want a followed %v in %s (#%d)", got, tt.kind, tt.key, tt.pr)
			}
			if tt.kind == webhook.Status && got.Head != sha1 {
				t.Errorf("status hint's head = %q, want %s", got.Head, sha1)
			}
		})
	}

	h, rec := newHandler(t, followed)
	wantResponse(t, serve(h, githubRequest("status", "o1", statusBody(githubRepo("acme/other")))), http.StatusAccepted, "no pull request followed in this repository")
	wantResponse(t, serve(h, githubRequest("status", "o2", statusBody(githubRepo("acme/campaigns")))), http.StatusAccepted, "event ignored")
	wantResponse(t, serve(h, githubRequest("ping", "o3", []byte(`{"zen":"z","repository":`+githubRepo("acme/other")+`}`))), http.StatusOK, "pong")
	wantHints(t, rec, 0)
	// The campaigns repository is still watched, and says so.
	wantResponse(t, serve(h, githubRequest("push", "o4", pushBody(githubRepo("acme/campaigns")))), http.StatusAccepted, "accepted")
	if got := wantHints(t, rec, 1)[0]; !got.Watched || got.Followed {
		t.Errorf("campaigns push = %+v, want watched and not followed", got)
	}
	// An ignored delivery's id is not used up: once the repository is
	// followed, the same delivery is a hint.
	asked = nil
	h, rec = newHandler(t, func(o *webhook.Options) {
		o.Followed = func(key string) bool { asked = append(asked, key); return len(asked) > 1 }
	})
	body := statusBody(githubRepo("acme/late"))
	wantResponse(t, serve(h, githubRequest("status", "late", body)), http.StatusAccepted, "no pull request followed in this repository")
	wantResponse(t, serve(h, githubRequest("status", "late", body)), http.StatusAccepted, "accepted")
	wantHints(t, rec, 1)
	// A status with no commit is malformed.
	wantResponse(t, serve(h, githubRequest("status", "nosha", []byte(`{"state":"success","repository":`+githubRepo("acme/late")+`}`))),
		http.StatusBadRequest, "malformed payload: no commit")
}

func TestPullRequestKey(t *testing.T) {
	for page, want := range map[string]string{
		"https://github.com/Acme/API/pull/7":         "github.com/acme/api",
		"http://127.0.0.1:3000/alice/web/pulls/12":   "127.0.0.1/alice/web",
		"https://git.example/gitea/acme/api/pulls/3": "git.example/acme/api",
		"https://github.com/acme/api":                "",
		"https://github.com/acme/api/pull/seven":     "",
		"https://github.com/acme/api/issues/7":       "",
		"file:///srv/repos/api.git":                  "",
		"not a url":                                  "",
	} {
		if got := webhook.PullRequestKey(page); got != want {
			t.Errorf("PullRequestKey(%q) = %q, want %q", page, got, want)
		}
	}
}

// TestRefused sends requests that must be refused with no side effect:
// no hint, and the delivery id not used up (a valid delivery with the same
// id afterwards gives its hint).
func TestRefused(t *testing.T) {
	body := pushBody(githubRepo("acme/campaigns"))
	tests := []struct {
		name string
		req  func(id string) *http.Request
		code int
		msg  string
	}{
		{"missing signature", func(id string) *http.Request {
			r := githubRequest("push", id, body)
			r.Header.Del("X-Hub-Signature-256")
			return r
		}, http.StatusUnauthorized, "missing signature"},
		{"wrong signature", func(id string) *http.Request {
			r := githubRequest("push", id, body)
			r.Header.Set("X-Hub-Signature-256", "sha256="+webhook.Sign(secret, []byte(`{"other":"body"}`)))
			return r
		}, http.StatusUnauthorized, "invalid signature"},
		{"signed with another secret", func(id string) *http.Request {
			r := githubRequest("push", id, body)
			r.Header.Set("X-Hub-Signature-256", "sha256="+webhook.Sign([]byte("not-the-secret"), body))
			return r
		}, http.StatusUnauthorized, "invalid signature"},
		{"signature without sha256= prefix", func(id string) *http.Request {
			r := githubRequest("push", id, body)
			r.Header.Set("X-Hub-Signature-256", webhook.Sign(secret, body))
			return r
		}, http.StatusUnauthorized, "invalid signature"},
		{"signature not hex", func(id string) *http.Request {
			r := githubRequest("push", id, body)
			r.Header.Set("X-Hub-Signature-256", "sha256=zz")
			return r
		}, http.StatusUnauthorized, "invalid signature"},
		{"body changed after signing", func(id string) *http.Request {
			r := githubRequest("push", id, body)
			r.Body = io.NopCloser(bytes.NewReader(bytes.Replace(body, []byte(sha1), []byte(sha2), 1)))
			return r
		}, http.StatusUnauthorized, "invalid signature"},
		{"gitea with one wrong signature", func(id string) *http.Request {
			gb := pushBody(giteaRepo("acme/campaigns"))
			r := giteaRequest("push", "push", id, gb)
			r.Header.Set("X-Gitea-Signature", webhook.Sign([]byte("not-the-secret"), gb))
			return r
		}, http.StatusUnauthorized, "invalid signature"},
		{"gitea with no signature", func(id string) *http.Request {
			r := giteaRequest("push", "push", id, pushBody(giteaRepo("acme/campaigns")))
			r.Header.Del("X-Gitea-Signature")
			r.Header.Del("X-Hub-Signature-256")
			return r
		}, http.StatusUnauthorized, "missing signature"},
		{"GET", func(id string) *http.Request {
			r := githubRequest("push", id, body)
			r.Method = http.MethodGet
			return r
		}, http.StatusMethodNotAllowed, "method not allowed: use POST"},
		{"unknown repository", func(id string) *http.Request {
			return githubRequest("push", id, pushBody(githubRepo("acme/other")))
		}, http.StatusNotFound, "repository not watched"},
		{"watched name on another host", func(id string) *http.Request {
			return giteaRequest("push", "push", id, pushBody(strings.ReplaceAll(giteaRepo("acme/campaigns"), "gitea.example", "elsewhere.example")))
		}, http.StatusNotFound, "repository not watched"},
		{"malformed JSON", func(id string) *http.Request {
			return githubRequest("push", id, []byte(`{"ref":"refs/heads/main","repository":`))
		}, http.StatusBadRequest, "malformed payload"},
		{"push without repository", func(id string) *http.Request {
			return githubRequest("push", id, []byte(`{"ref":"refs/heads/main"}`))
		}, http.StatusBadRequest, "malformed payload: no repository"},
		{"pull request without number", func(id string) *http.Request {
			return githubRequest("pull_request", id, []byte(`{"repository":`+githubRepo("acme/campaigns")+`}`))
		}, http.StatusBadRequest, "malformed payload: no pull request number"},
		{"missing event header", func(id string) *http.Request {
			r := githubRequest("push", id, body)
			r.Header.Del("X-GitHub-Event")
			return r
		}, http.StatusBadRequest, "missing event header"},
		{"text/plain", func(id string) *http.Request {
			r := githubRequest("push", id, body)
			r.Header.Set("Content-Type", "text/plain")
			return r
		}, http.StatusUnsupportedMediaType, "content type must be application/json or application/x-www-form-urlencoded"},
		{"gitea form", func(id string) *http.Request {
			r := giteaRequest("push", "push", id, pushBody(giteaRepo("acme/campaigns")))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, http.StatusUnsupportedMediaType, "content type must be application/json: set the Gitea webhook's POST content type to application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, rec := newHandler(t)
			wantResponse(t, serve(h, tt.req("d-refused")), tt.code, tt.msg)
			wantHints(t, rec, 0)

			wantResponse(t, serve(h, githubRequest("push", "d-refused", body)), http.StatusAccepted, "accepted")
			wantHints(t, rec, 1)
		})
	}
}

func TestMissingDeliveryID(t *testing.T) {
	h, rec := newHandler(t)
	r := githubRequest("push", "", pushBody(githubRepo("acme/campaigns")))
	wantResponse(t, serve(h, r), http.StatusBadRequest, "missing delivery id")
	r = githubRequest("push", strings.Repeat("x", 129), pushBody(githubRepo("acme/campaigns")))
	wantResponse(t, serve(h, r), http.StatusBadRequest, "invalid delivery id")
	wantHints(t, rec, 0)
}

// countingReader is an endless body that counts the bytes read from it.
type countingReader struct{ n atomic.Int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	clear(p)
	c.n.Add(int64(len(p)))
	return len(p), nil
}

func TestOversizedBody(t *testing.T) {
	const limit = 4 << 10
	tests := []struct {
		name     string
		declared int64 // Content-Length; -1 unknown (chunked)
		maxRead  int64
	}{
		{"declared length over the cap", 10 << 20, 0},
		{"chunked body over the cap", -1, limit + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, rec := newHandler(t, func(o *webhook.Options) { o.MaxBody = limit })
			body := &countingReader{}
			r := githubRequest("push", "d-big", nil)
			r.Body = io.NopCloser(body)
			r.ContentLength = tt.declared
			wantResponse(t, serve(h, r), http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit))
			wantHints(t, rec, 0)
			if n := body.n.Load(); n > tt.maxRead {
				t.Fatalf("read %d bytes of the body, want at most %d", n, tt.maxRead)
			}
		})
	}
}

func TestBodyAtTheCap(t *testing.T) {
	body := pushBody(githubRepo("acme/campaigns"))
	h, rec := newHandler(t, func(o *webhook.Options) { o.MaxBody = int64(len(body)) })
	wantResponse(t, serve(h, githubRequest("push", "d-cap", body)), http.StatusAccepted, "accepted")
	wantHints(t, rec, 1)
}

func TestReplayedDelivery(t *testing.T) {
	h, rec := newHandler(t)
	body := pushBody(githubRepo("acme/campaigns"))
	wantResponse(t, serve(h, githubRequest("push", "d-1", body)), http.StatusAccepted, "accepted")
	wantResponse(t, serve(h, githubRequest("push", "d-1", body)), http.StatusOK, "duplicate delivery, ignored")
	// Another validly signed body under the same id is a replay too.
	other := pullRequestBody(githubRepo("acme/campaigns"), 5)
	wantResponse(t, serve(h, githubRequest("pull_request", "d-1", other)), http.StatusOK, "duplicate delivery, ignored")
	wantHints(t, rec, 1)
}

// TestReplayUnderANewID: the signature covers the body, not the headers,
// so whoever saw one delivery can send its body again under any id; it is
// still the delivery already seen.
func TestReplayUnderANewID(t *testing.T) {
	h, rec := newHandler(t)
	body := pushBody(githubRepo("acme/campaigns"))
	wantResponse(t, serve(h, githubRequest("push", "d-1", body)), http.StatusAccepted, "accepted")
	wantResponse(t, serve(h, githubRequest("push", "d-2", body)), http.StatusOK, "duplicate delivery, ignored")
	wantResponse(t, serve(h, giteaRequest("push", "push", "d-3", body)), http.StatusOK, "duplicate delivery, ignored")
	wantHints(t, rec, 1)
}

func TestConcurrentReplaysHintOnce(t *testing.T) {
	h, rec := newHandler(t)
	body := pushBody(githubRepo("acme/campaigns"))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() { serve(h, githubRequest("push", "d-race", body)) })
	}
	wg.Wait()
	wantHints(t, rec, 1)
}

func TestFailedSignatureDoesNotBurnDeliveryID(t *testing.T) {
	h, rec := newHandler(t)
	body := pushBody(githubRepo("acme/campaigns"))
	forged := githubRequest("push", "d-target", body)
	forged.Header.Set("X-Hub-Signature-256", "sha256="+webhook.Sign([]byte("guess"), body))
	wantResponse(t, serve(h, forged), http.StatusUnauthorized, "invalid signature")
	wantResponse(t, serve(h, githubRequest("push", "d-target", body)), http.StatusAccepted, "accepted")
	if got := wantHints(t, rec, 1)[0]; got.DeliveryID != "d-target" {
		t.Fatalf("hint delivery = %q, want d-target", got.DeliveryID)
	}
}

func TestReplayCacheIsBounded(t *testing.T) {
	h, rec := newHandler(t, func(o *webhook.Options) { o.ReplayEntries = 3 })
	body := func(id string) []byte { return pullRequestBody(githubRepo("acme/campaigns"), int(id[0])) }
	for _, id := range []string{"a", "b", "c", "d"} {
		wantResponse(t, serve(h, githubRequest("pull_request", id, body(id))), http.StatusAccepted, "accepted")
	}
	// "a" was the oldest of four in a cache of three: forgotten.
	wantResponse(t, serve(h, githubRequest("pull_request", "a", body("a"))), http.StatusAccepted, "accepted")
	// Now c, d, a are remembered.
	for _, id := range []string{"c", "d", "a"} {
		wantResponse(t, serve(h, githubRequest("pull_request", id, body(id))), http.StatusOK, "duplicate delivery, ignored")
	}
	wantHints(t, rec, 5)
}

func TestReplayWindow(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	h, rec := newHandler(t, func(o *webhook.Options) {
		o.ReplayWindow = time.Hour
		o.Now = func() time.Time { return now }
	})
	body := pushBody(githubRepo("acme/campaigns"))
	wantResponse(t, serve(h, githubRequest("push", "d-1", body)), http.StatusAccepted, "accepted")
	now = now.Add(59 * time.Minute)
	wantResponse(t, serve(h, githubRequest("push", "d-1", body)), http.StatusOK, "duplicate delivery, ignored")
	now = now.Add(time.Minute)
	wantResponse(t, serve(h, githubRequest("push", "d-1", body)), http.StatusAccepted, "accepted")
	wantHints(t, rec, 2)
}

func TestPing(t *testing.T) {
	tests := []struct {
		name string
		body string
		code int
		msg  string
	}{
		{"repository hook", `{"zen":"Keep it logically awesome.","hook_id":1,"repository":` + githubRepo("acme/campaigns") + `}`, http.StatusOK, "pong"},
		{"organization hook", `{"zen":"Design for failure.","hook_id":2,"organization":{"login":"acme"}}`, http.StatusOK, "pong"},
		{"repository not watched", `{"zen":"Half measures are as bad as nothing at all.","repository":` + githubRepo("acme/other") + `}`, http.StatusNotFound, "repository not watched"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, rec := newHandler(t)
			wantResponse(t, serve(h, githubRequest("ping", "d-ping", []byte(tt.body))), tt.code, tt.msg)
			wantHints(t, rec, 0)
		})
	}
}

func TestRepositoryForms(t *testing.T) {
	tests := []struct {
		name    string
		watched string
		repo    string
		accept  bool
	}{
		{"https with .git", "https://github.com/acme/campaigns.git", githubRepo("acme/campaigns"), true},
		{"https without .git, other case", "https://GitHub.com/Acme/Campaigns", githubRepo("acme/campaigns"), true},
		{"trailing slash", "https://github.com/acme/campaigns/", githubRepo("acme/campaigns"), true},
		{"scp", "git@github.com:acme/campaigns.git", githubRepo("acme/campaigns"), true},
		{"ssh with port", "ssh://git@github.com:22/acme/campaigns.git", githubRepo("acme/campaigns"), true},
		{"payload in another case", "https://github.com/acme/campaigns", githubRepo("Acme/Campaigns"), true},
		{"gitea https with port", "https://gitea.example:3000/acme/campaigns", giteaRepo("acme/campaigns"), true},
		{"gitea ssh on another port", "ssh://git@gitea.example:2222/acme/campaigns.git", giteaRepo("acme/campaigns"), true},
		{"only the full name matches", "https://github.com/acme/campaigns",
			`{"full_name":"acme/campaigns","html_url":"https://github.com/"}`, true},
		{"another repository", "https://github.com/acme/campaigns", githubRepo("acme/campaigns-old"), false},
		{"another owner", "https://github.com/acme/campaigns", githubRepo("evil/campaigns"), false},
		{"another host", "https://gitea.example/acme/campaigns", githubRepo("acme/campaigns"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, rec := newHandler(t, func(o *webhook.Options) { o.Repos = []string{tt.watched} })
			w := serve(h, githubRequest("push", "d-1", pushBody(tt.repo)))
			if tt.accept {
				wantResponse(t, w, http.StatusAccepted, "accepted")
				wantHints(t, rec, 1)
			} else {
				wantResponse(t, w, http.StatusNotFound, "repository not watched")
				wantHints(t, rec, 0)
			}
		})
	}
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	hint := func(webhook.Event) {}
	tests := []struct {
		name string
		opts webhook.Options
		want string
	}{
		{"no secret", webhook.Options{Repos: watched, Hint: hint}, "no secret"},
		{"no hint", webhook.Options{Secret: secret, Repos: watched}, "no Hint"},
		{"no repositories", webhook.Options{Secret: secret, Hint: hint}, "no repositories"},
		{"local path", webhook.Options{Secret: secret, Hint: hint, Repos: []string{"/srv/campaigns"}}, "is not a URL"},
		{"file URL", webhook.Options{Secret: secret, Hint: hint, Repos: []string{"file:///srv/campaigns"}}, `scheme "file"`},
		{"host only", webhook.Options{Secret: secret, Hint: hint, Repos: []string{"https://github.com/"}}, "want https://host/owner/name"},
		{"credentials are not repeated", webhook.Options{Secret: secret, Hint: hint, Repos: []string{"https://x:tok3n@github.com"}}, "REDACTED@"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhook.New(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "tok3n") {
				t.Fatalf("error %q repeats a token", err)
			}
		})
	}
}

func TestZeroHandlerRefuses(t *testing.T) {
	var h webhook.Handler
	wantResponse(t, serve(&h, githubRequest("push", "d-1", pushBody(githubRepo("acme/campaigns")))),
		http.StatusServiceUnavailable, "webhook receiver has no secret")
}

// TestSign checks Sign against the example in GitHub's documentation
// ("Validating webhook deliveries").
func TestSign(t *testing.T) {
	got := webhook.Sign([]byte("It's a Secret to Everybody"), []byte("Hello, World!"))
	if want := "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestOverHTTP(t *testing.T) {
	h, rec := newHandler(t, func(o *webhook.Options) { o.MaxBody = 64 << 10 })
	srv := httptest.NewServer(h)
	defer srv.Close()

	post := func(r *http.Request) (int, string) {
		t.Helper()
		u, _ := url.Parse(srv.URL + "/hooks")
		r.URL, r.RequestURI, r.Host = u, "", u.Host
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	body := pushBody(githubRepo("acme/campaigns"))
	if code, msg := post(githubRequest("push", "d-http", body)); code != http.StatusAccepted || msg != "accepted" {
		t.Fatalf("valid push: %d %q", code, msg)
	}
	big := githubRequest("push", "d-http-big", nil)
	big.Body = io.NopCloser(io.LimitReader(&countingReader{}, 128<<10))
	big.ContentLength = 128 << 10
	if code, msg := post(big); code != http.StatusRequestEntityTooLarge || msg != "body larger than 65536 bytes" {
		t.Fatalf("big push: %d %q", code, msg)
	}
	wantHints(t, rec, 1)
}
