package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults for the zero fields of Options.
const (
	DefaultMaxBody       = 1 << 20
	DefaultReplayEntries = 10_000
	DefaultReplayWindow  = 24 * time.Hour
)

// maxDeliveryID bounds the delivery ids remembered; forges send UUIDs.
const maxDeliveryID = 128

// Source is the forge a webhook came from.
type Source uint8

// Forges that send webhooks.
const (
	GitHub Source = iota + 1
	Gitea
)

func (s Source) String() string {
	switch s {
	case GitHub:
		return "github"
	case Gitea:
		return "gitea"
	}
	return fmt.Sprintf("Source(%d)", uint8(s))
}

// Kind is what happened on the forge.
type Kind uint8

// Kinds of events that give a hint.
const (
	// Push is a push to a branch or tag.
	Push Kind = iota + 1
	// PullRequest is any change to a pull request: opened, synchronized,
	// closed, merged, labelled, assigned, review requested.
	PullRequest
	// Review is a review or a review comment on a pull request.
	Review
	// Status is a commit status or a check on a commit: GitHub's status,
	// check_run and check_suite, Gitea's status. It hints only at the
	// pull requests fleetlift follows (Options.Followed).
	Status
)

func (k Kind) String() string {
	switch k {
	case Push:
		return "push"
	case PullRequest:
		return "pull_request"
	case Review:
		return "review"
	case Status:
		return "status"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is a hint that Git changed. It carries only what the forge said;
// nothing in it is checked against Git, and the reconciler must read Git
// to learn what is true.
type Event struct {
	Source     Source
	Kind       Kind
	DeliveryID string
	// Repository is the full name (owner/name) and CloneURL the https
	// clone URL, as the forge reports them.
	Repository string
	CloneURL   string
	// Key is the repository as host/owner/name, lower case: what
	// Options.Followed was asked about.
	Key string
	// Watched: the repository is one of Options.Repos (the campaigns
	// repository). Followed: Options.Followed said fleetlift follows
	// pull requests in it. One or both is set.
	Watched, Followed bool
	// Ref (refs/heads/main) and After (the new commit SHA) are set for
	// Push.
	Ref   string
	After string
	// PullRequest is the pull request number for PullRequest and Review.
	PullRequest int
	// Head is the commit a Status is about.
	Head string
}

// Options configure a Handler.
type Options struct {
	// Secret is the webhook secret shared with the forge. Required.
	Secret []byte
	// Repos are the watched repositories as URLs: https://host/owner/name,
	// with or without .git, ssh://[user@]host[:port]/owner/name.git or
	// scp-like user@host:owner/name.git. Hosts and paths compare
	// case-insensitively; schemes, users and ports are ignored, so any
	// form matches any other for the same host and path. Required.
	Repos []string
	// Followed, when set, says whether fleetlift follows pull requests
	// in a repository other than those of Repos, given as
	// host/owner/name in lower case (the forge's host without its
	// port): the target repositories of campaigns. Events for those are
	// hints too, with Event.Followed set, and events for a repository
	// neither watched nor followed are ignored (202) instead of refused
	// with 404, since the repositories followed come and go with the
	// campaigns. It is called on the request's goroutine and must
	// return quickly.
	Followed func(key string) bool
	// Hint is called once for every accepted event, on the request's
	// goroutine before the response is written. It must return quickly
	// and must not block: a non-blocking send on a buffered channel, for
	// example, dropping the hint when one is already pending. Required.
	Hint func(Event)
	// MaxBody is the largest body read, in bytes; 0 means DefaultMaxBody.
	// Larger bodies are refused with 413 and never read to the end.
	MaxBody int64
	// ReplayEntries and ReplayWindow bound the delivery ids remembered:
	// at most ReplayEntries ids (0 means DefaultReplayEntries), each for
	// at most ReplayWindow (0 means DefaultReplayWindow).
	ReplayEntries int
	ReplayWindow  time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives a line for every delivery (refusals at info, the rest
	// at debug); nil discards them.
	Log *slog.Logger
	// Delivered, when set, is told how every request ended (metrics). It
	// must return quickly.
	Delivered func(Outcome)
}

// Outcome is how the Handler answered one request.
type Outcome string

const (
	// OutcomeAccepted: a verified event for a watched repository: a hint.
	OutcomeAccepted Outcome = "accepted"
	// OutcomeIgnored: verified, but an event that gives no hint, or a ping.
	OutcomeIgnored Outcome = "ignored"
	// OutcomeDuplicate: a delivery id seen before.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeUnauthorized: no signature, or a wrong one.
	OutcomeUnauthorized Outcome = "unauthorized"
	// OutcomeRefused: any other refusal (method, size, headers, payload,
	// a repository not watched).
	OutcomeRefused Outcome = "refused"
)

func (o Outcome) String() string { return string(o) }

// Handler receives webhooks. Make one with New; the zero Handler refuses
// every request. It is safe for concurrent use.
type Handler struct {
	secret    []byte
	repos     map[string]bool
	followed  func(key string) bool
	hint      func(Event)
	maxBody   int64
	seen      *deliveries
	log       *slog.Logger
	delivered func(Outcome)
}

var _ http.Handler = (*Handler)(nil)

// New checks the options and returns a Handler.
func New(o Options) (*Handler, error) {
	if len(o.Secret) == 0 {
		return nil, errors.New("webhook: no secret")
	}
	if o.Hint == nil {
		return nil, errors.New("webhook: no Hint function")
	}
	if len(o.Repos) == 0 {
		return nil, errors.New("webhook: no repositories to watch")
	}
	repos := make(map[string]bool, len(o.Repos))
	for _, raw := range o.Repos {
		key, err := repoKey(raw)
		if err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
		repos[key] = true
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.ReplayEntries <= 0 {
		o.ReplayEntries = DefaultReplayEntries
	}
	if o.ReplayWindow <= 0 {
		o.ReplayWindow = DefaultReplayWindow
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Handler{
		secret:    append([]byte(nil), o.Secret...),
		repos:     repos,
		followed:  o.Followed,
		hint:      o.Hint,
		maxBody:   o.MaxBody,
		seen:      newDeliveries(2*o.ReplayEntries, o.ReplayWindow, o.Now), // two keys each
		log:       o.Log,
		delivered: o.Delivered,
	}, nil
}

// Sign returns the hex HMAC-SHA256 of body under secret: the value of
// Gitea's X-Gitea-Signature, and of GitHub's X-Hub-Signature-256 after
// "sha256=".
func Sign(secret, body []byte) string {
	return hex.EncodeToString(mac(secret, body))
}

func mac(secret, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return m.Sum(nil)
}

// delivery is what the headers of a request say.
type delivery struct {
	source Source
	event  string // as the forge named it, for logs
	kind   Kind   // 0 for events that give no hint
	id     string
	sigs   [][]byte
	form   bool
}

// ServeHTTP answers a webhook with a short plain-text status. Nothing in
// the body is parsed before its signature has been checked, and only an
// accepted event (202) calls Hint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h == nil || len(h.secret) == 0 {
		// Not made by New: refuse rather than accept unsigned requests.
		reply(w, http.StatusServiceUnavailable, "webhook receiver has no secret")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, r, nil, http.StatusMethodNotAllowed, "method not allowed: use POST")
		return
	}
	d, code, reason := fromHeaders(r.Header)
	if code != 0 {
		h.refuse(w, r, d, code, reason)
		return
	}
	if r.ContentLength > h.maxBody {
		h.refuse(w, r, d, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", h.maxBody))
		return
	}
	src := r.Body
	if src == nil {
		src = http.NoBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, src, h.maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			h.refuse(w, r, d, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", h.maxBody))
			return
		}
		h.refuse(w, r, d, http.StatusBadRequest, "cannot read body")
		return
	}
	if !h.verify(d.sigs, body) {
		h.refuse(w, r, d, http.StatusUnauthorized, "invalid signature")
		return
	}
	// From here on the body comes from the forge; the headers, the
	// delivery id among them, may not: the signature covers only the
	// body. A signed body sent again under a new id is a replay too.
	replay := replayKeys(d.id, body)
	if h.seen.has(replay...) {
		h.reply(w, d, http.StatusOK, "duplicate delivery, ignored")
		return
	}
	if d.kind == 0 && d.event != "ping" {
		h.reply(w, d, http.StatusAccepted, "event ignored")
		return
	}
	p, err := parse(body, d.form)
	if err != nil {
		h.refuse(w, r, d, http.StatusBadRequest, "malformed payload")
		return
	}
	if d.event == "ping" {
		// A repository hook's ping names its repository: say now whether
		// it is watched. An organization hook's ping names none, and
		// with Followed any repository may become followed.
		if p.Repository != nil && h.followed == nil && !h.watched(p.Repository) {
			h.refuse(w, r, d, http.StatusNotFound, "repository not watched")
			return
		}
		h.reply(w, d, http.StatusOK, "pong")
		return
	}
	ev, err := p.event(d)
	if err != nil {
		h.refuse(w, r, d, http.StatusBadRequest, "malformed payload: "+err.Error())
		return
	}
	ev.Watched = h.watched(p.Repository)
	ev.Key = key(p.Repository)
	ev.Followed = h.followed != nil && ev.Key != "" && h.followed(ev.Key)
	switch {
	case !ev.Watched && !ev.Followed && h.followed == nil:
		h.refuse(w, r, d, http.StatusNotFound, "repository not watched")
		return
	case !ev.Watched && !ev.Followed:
		h.reply(w, d, http.StatusAccepted, "no pull request followed in this repository")
		return
	case ev.Kind == Status && !ev.Followed:
		// A status on the campaigns repository says nothing of it.
		h.reply(w, d, http.StatusAccepted, "event ignored")
		return
	}
	// Remembered only now: a refused delivery leaves no trace.
	if !h.seen.add(replay...) {
		h.reply(w, d, http.StatusOK, "duplicate delivery, ignored")
		return
	}
	h.hint(ev)
	h.log.Info("webhook hint", "delivery", d.id, "source", d.source, "event", d.event,
		"repository", ev.Repository, "ref", ev.Ref, "pull_request", ev.PullRequest, "head", ev.Head,
		"watched", ev.Watched, "followed", ev.Followed)
	h.outcome(OutcomeAccepted)
	reply(w, http.StatusAccepted, "accepted")
}

// fromHeaders reads and checks everything the headers say, before any of the
// body is read. A non-zero code refuses the request.
func fromHeaders(hdr http.Header) (d *delivery, code int, reason string) {
	d = &delivery{source: GitHub}
	if hdr.Get("X-Gitea-Event") != "" || hdr.Get("X-Gitea-Delivery") != "" {
		d.source = Gitea
	}
	switch d.source {
	case GitHub:
		d.event = hdr.Get("X-GitHub-Event")
		d.kind = githubKind(d.event)
		d.id = hdr.Get("X-GitHub-Delivery")
	case Gitea:
		d.event = hdr.Get("X-Gitea-Event")
		d.kind = giteaKind(d.event, hdr.Get("X-Gitea-Event-Type"))
		if t := hdr.Get("X-Gitea-Event-Type"); t != "" {
			d.event = t
		}
		d.id = hdr.Get("X-Gitea-Delivery")
		if d.id == "" {
			d.id = hdr.Get("X-GitHub-Delivery")
		}
	}
	if d.event == "" {
		return d, http.StatusBadRequest, "missing event header"
	}
	if d.id == "" {
		return d, http.StatusBadRequest, "missing delivery id"
	}
	if !validID(d.id) {
		d.id = ""
		return d, http.StatusBadRequest, "invalid delivery id"
	}
	if sig := hdr.Get("X-Hub-Signature-256"); sig != "" {
		hexSig, ok := strings.CutPrefix(sig, "sha256=")
		if !ok {
			return d, http.StatusUnauthorized, "invalid signature"
		}
		d.sigs = append(d.sigs, decodeSig(hexSig))
	}
	if d.source == Gitea {
		if sig := hdr.Get("X-Gitea-Signature"); sig != "" {
			d.sigs = append(d.sigs, decodeSig(sig))
		}
	}
	if len(d.sigs) == 0 {
		return d, http.StatusUnauthorized, "missing signature"
	}
	for _, s := range d.sigs {
		if s == nil {
			return d, http.StatusUnauthorized, "invalid signature"
		}
	}
	switch mt, _, _ := mime.ParseMediaType(hdr.Get("Content-Type")); {
	case mt == "application/json":
	case mt == "application/x-www-form-urlencoded" && d.source == GitHub:
		d.form = true
	case mt == "application/x-www-form-urlencoded":
		// Gitea signs the JSON it puts in the form, not the body it sends.
		return d, http.StatusUnsupportedMediaType, "content type must be application/json: set the Gitea webhook's POST content type to application/json"
	default:
		return d, http.StatusUnsupportedMediaType, "content type must be application/json or application/x-www-form-urlencoded"
	}
	return d, 0, ""
}

// decodeSig decodes a hex HMAC-SHA256, or returns nil.
func decodeSig(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return nil
	}
	return b
}

// verify reports whether every signature the request carries is the
// HMAC-SHA256 of body, compared in constant time.
func (h *Handler) verify(sigs [][]byte, body []byte) bool {
	want := mac(h.secret, body)
	for _, s := range sigs {
		if !hmac.Equal(s, want) {
			return false
		}
	}
	return len(sigs) > 0
}

// replayKeys are what a delivery is remembered by: its id, and the
// digest of its signed body.
func replayKeys(id string, body []byte) []string {
	sum := sha256.Sum256(body)
	return []string{"id " + id, "body " + hex.EncodeToString(sum[:])}
}

func validID(id string) bool {
	if len(id) > maxDeliveryID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// githubKind maps X-GitHub-Event to a Kind; 0 means no hint.
func githubKind(event string) Kind {
	switch {
	case event == "push":
		return Push
	case event == "pull_request":
		return PullRequest
	case event == "status", event == "check_run", event == "check_suite":
		return Status
	case strings.HasPrefix(event, "pull_request_review"):
		// pull_request_review, pull_request_review_comment,
		// pull_request_review_thread.
		return Review
	}
	return 0
}

// giteaKind maps Gitea's event headers to a Kind; 0 means no hint.
// X-Gitea-Event-Type is the precise one (pull_request_review_approved);
// X-Gitea-Event groups several types and names reviews differently
// (pull_request_approved, and pull_request_comment for a review comment).
func giteaKind(event, eventType string) Kind {
	if eventType != "" {
		switch eventType {
		case "push":
			return Push
		case "pull_request", "pull_request_sync", "pull_request_assign", "pull_request_label",
			"pull_request_milestone", "pull_request_review_request":
			return PullRequest
		case "status":
			return Status
		}
		if strings.HasPrefix(eventType, "pull_request_review") {
			return Review
		}
		return 0
	}
	switch event {
	case "push":
		return Push
	case "pull_request":
		return PullRequest
	case "status":
		return Status
	case "pull_request_approved", "pull_request_rejected", "pull_request_comment":
		return Review
	}
	if strings.HasPrefix(event, "pull_request_review") {
		return Review
	}
	return 0
}

// payload holds the few fields read from a webhook body.
type payload struct {
	Ref         string `json:"ref"`
	After       string `json:"after"`
	Number      int    `json:"number"`
	PullRequest *struct {
		Number int `json:"number"`
	} `json:"pull_request"`
	// SHA is a status's commit; CheckRun and CheckSuite are GitHub's
	// checks, with theirs.
	SHA        string      `json:"sha"`
	CheckRun   *checkRef   `json:"check_run"`
	CheckSuite *checkRef   `json:"check_suite"`
	Repository *repository `json:"repository"`
}

type checkRef struct {
	HeadSHA string `json:"head_sha"`
}

type repository struct {
	FullName string `json:"full_name"`
	CloneURL string `json:"clone_url"`
	SSHURL   string `json:"ssh_url"`
	HTMLURL  string `json:"html_url"`
	GitURL   string `json:"git_url"`
}

// parse decodes a verified body: JSON, or for GitHub's form content type
// the JSON in its payload field.
func parse(body []byte, form bool) (*payload, error) {
	if form {
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, err
		}
		body = []byte(v.Get("payload"))
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// event is the hint p gives, or an error naming what p lacks.
func (p *payload) event(d *delivery) (Event, error) {
	if p.Repository == nil || p.Repository.FullName == "" {
		return Event{}, errors.New("no repository")
	}
	ev := Event{
		Source:     d.source,
		Kind:       d.kind,
		DeliveryID: d.id,
		Repository: p.Repository.FullName,
		CloneURL:   p.Repository.CloneURL,
	}
	switch d.kind {
	case Push:
		if p.Ref == "" {
			return Event{}, errors.New("no ref")
		}
		ev.Ref, ev.After = p.Ref, p.After
	case PullRequest, Review:
		ev.PullRequest = p.Number
		if ev.PullRequest == 0 && p.PullRequest != nil {
			ev.PullRequest = p.PullRequest.Number
		}
		if ev.PullRequest <= 0 {
			return Event{}, errors.New("no pull request number")
		}
	case Status:
		ev.Head = p.SHA
		for _, c := range []*checkRef{p.CheckRun, p.CheckSuite} {
			if ev.Head == "" && c != nil {
				ev.Head = c.HeadSHA
			}
		}
		if ev.Head == "" {
			return Event{}, errors.New("no commit")
		}
	}
	return ev, nil
}

// key is r as host/owner/name in lower case, the host taken from the
// first of its URLs that has one; empty when none has.
func key(r *repository) string {
	name := strings.ToLower(strings.Trim(r.FullName, "/"))
	if !strings.Contains(name, "/") {
		return ""
	}
	for _, u := range []string{r.HTMLURL, r.CloneURL, r.SSHURL, r.GitURL} {
		if host, _, err := split(u); err == nil && host != "" {
			return host + "/" + name
		}
	}
	return ""
}

// watched reports whether any URL of r, or its full name on the host of
// one of them, is a watched repository.
func (h *Handler) watched(r *repository) bool {
	name := strings.ToLower(strings.Trim(r.FullName, "/"))
	for _, u := range []string{r.CloneURL, r.SSHURL, r.HTMLURL, r.GitURL} {
		if key, err := repoKey(u); err == nil && h.repos[key] {
			return true
		}
		if host, _, err := split(u); err == nil && host != "" && strings.Contains(name, "/") && h.repos[host+"/"+name] {
			return true
		}
	}
	return false
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, d *delivery, code int, reason string) {
	attrs := []any{"status", code, "reason", reason, "remote", r.RemoteAddr}
	if d != nil {
		attrs = append(attrs, "source", d.source, "event", d.event, "delivery", d.id)
	}
	h.log.Info("webhook refused", attrs...)
	if code == http.StatusUnauthorized {
		h.outcome(OutcomeUnauthorized)
	} else {
		h.outcome(OutcomeRefused)
	}
	reply(w, code, reason)
}

func (h *Handler) reply(w http.ResponseWriter, d *delivery, code int, msg string) {
	h.log.Debug("webhook "+msg, "status", code, "source", d.source, "event", d.event, "delivery", d.id)
	if code == http.StatusOK && strings.HasPrefix(msg, "duplicate") {
		h.outcome(OutcomeDuplicate)
	} else {
		h.outcome(OutcomeIgnored)
	}
	reply(w, code, msg)
}

func (h *Handler) outcome(o Outcome) {
	if h.delivered != nil {
		h.delivered(o)
	}
}

// reply writes msg as a plain-text body; http.Error also sets nosniff.
func reply(w http.ResponseWriter, code int, msg string) {
	http.Error(w, msg, code)
}
