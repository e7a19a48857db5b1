package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/redact"
)

// Kinds of service.
const (
	// KindSlack posts {"text": …} to a Slack incoming webhook, whose URL
	// is its secret.
	KindSlack = "slack"
	// KindWebhook posts the Message as JSON, signed (Sign).
	KindWebhook = "webhook"
)

// Service is one of the operator's notification services.
type Service struct {
	Name string
	Kind string
	// URL is where messages are posted: https, or http to this machine.
	URL string
	// Secret signs a webhook's messages.
	Secret []byte
}

// String names the service without its secrets: a Slack webhook's URL is
// one.
func (s Service) String() string {
	if s.Kind == KindSlack {
		return s.Name + " (slack)"
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return s.Name + " (webhook)"
	}
	return fmt.Sprintf("%s (webhook to %s://%s)", s.Name, u.Scheme, u.Host)
}

var serviceName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ParseService reads a --notify flag: NAME=slack,url-env=VAR or
// NAME=webhook,url=URL,secret-env=VAR (url-env for a URL that is itself
// secret). Secrets come from the environment (getenv) by the variable's
// name, never from the flag, so they stay out of process listings and
// shell history; a webhook must have one.
func ParseService(flag string, getenv func(string) string) (Service, error) {
	name, rest, ok := strings.Cut(flag, "=")
	if !ok || !serviceName.MatchString(name) {
		return Service{}, fmt.Errorf("--notify %q: want NAME=slack,url-env=VAR or NAME=webhook,url=URL,secret-env=VAR, NAME lower-case letters, digits and '-'", flag)
	}
	parts := strings.Split(rest, ",")
	s := Service{Name: name, Kind: parts[0]}
	if s.Kind != KindSlack && s.Kind != KindWebhook {
		return Service{}, fmt.Errorf("--notify %s: kind %q is neither slack nor webhook", name, s.Kind)
	}
	env := func(key, v string) (string, error) {
		if v == "" {
			return "", fmt.Errorf("--notify %s: %s names no variable", name, key)
		}
		got := getenv(v)
		if got == "" {
			return "", fmt.Errorf("--notify %s: %s=%s, but $%s is not set", name, key, v, v)
		}
		return got, nil
	}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		var err error
		switch k {
		case "url":
			if s.Kind == KindSlack {
				return Service{}, fmt.Errorf("--notify %s: a Slack webhook's URL is a secret: give it as url-env=VAR", name)
			}
			s.URL = v
		case "url-env":
			s.URL, err = env(k, v)
		case "secret-env":
			var sec string
			sec, err = env(k, v)
			s.Secret = []byte(sec)
		default:
			return Service{}, fmt.Errorf("--notify %s: unknown option %q (url, url-env, secret-env)", name, k)
		}
		if err != nil {
			return Service{}, err
		}
	}
	if s.URL == "" {
		return Service{}, fmt.Errorf("--notify %s: no url (url=URL or url-env=VAR)", name)
	}
	if err := checkURL(s.URL); err != nil {
		return Service{}, fmt.Errorf("--notify %s: %w", name, err)
	}
	if s.Kind == KindWebhook && len(s.Secret) == 0 {
		return Service{}, fmt.Errorf("--notify %s: a webhook is signed: give its key as secret-env=VAR", name)
	}
	return s, nil
}

// checkURL accepts https URLs, and http ones to a loopback address.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("the url is not an absolute http(s) URL")
	}
	if u.User != nil {
		return errors.New("the url carries credentials; a webhook is signed instead")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return errors.New("the url must be https (or http to this machine)")
}

// Headers of a webhook's request.
const (
	HeaderEvent     = "X-Fleetlift-Event"
	HeaderDelivery  = "X-Fleetlift-Delivery"
	HeaderTimestamp = "X-Fleetlift-Timestamp"
	HeaderSignature = "X-Fleetlift-Signature"
)

// Sign is a webhook request's signature: "v1=" and the hex HMAC-SHA256,
// under secret, of the timestamp (Unix seconds, as sent in
// X-Fleetlift-Timestamp), a dot and the body. The timestamp lets a
// receiver refuse an old request replayed.
func Sign(secret []byte, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(timestamp))
	mac.Write([]byte("."))
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a webhook request as a receiver does: its signature, and
// that its timestamp is within skew of now.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, skew time.Duration) error {
	ts := h.Get(HeaderTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("no timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > skew || d < -skew {
		return fmt.Errorf("timestamp %s is %s away", ts, d.Round(time.Second))
	}
	if !hmac.Equal([]byte(h.Get(HeaderSignature)), []byte(Sign(secret, ts, body))) {
		return errors.New("bad signature")
	}
	return nil
}

// Error is a delivery that failed.
type Error struct {
	// Status is the HTTP status; 0 when there was no response.
	Status int
	// RetryAfter is how long the service asked to wait (429, 503).
	RetryAfter time.Duration
	msg        string
}

func (e *Error) Error() string { return e.msg }

// Retryable says whether the same message may be delivered later: no
// response, 408, 429 and server errors; not the other refusals, which
// another try would meet again.
func (e *Error) Retryable() bool {
	return e.Status == 0 || e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// Client posts messages.
type Client struct {
	// HTTP is the client; nil means one with a 30 s timeout that does not
	// follow redirects (a redirect would take a signed body elsewhere).
	HTTP *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Send posts m to s once. Errors are *Error and name the service without
// its secrets.
func (c *Client) Send(ctx context.Context, s Service, m Message) error {
	var body []byte
	var err error
	if s.Kind == KindSlack {
		body, err = json.Marshal(struct {
			Text string `json:"text"`
		}{m.Text})
	} else {
		body, err = json.Marshal(m)
	}
	if err != nil {
		return &Error{msg: fmt.Sprintf("notify %s: %v", s, err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return &Error{msg: fmt.Sprintf("notify %s: %v", s, redact.URLs(err.Error()))}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "fleetlift-notify")
	if s.Kind == KindWebhook {
		now := time.Now
		if c.Now != nil {
			now = c.Now
		}
		ts := strconv.FormatInt(now().Unix(), 10)
		req.Header.Set(HeaderEvent, m.Event)
		req.Header.Set(HeaderDelivery, m.Key)
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, Sign(s.Secret, ts, body))
	}
	resp, err := c.client().Do(req)
	if err != nil {
		// The error quotes the URL, which for Slack is the secret.
		msg := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			msg = ue.Err.Error()
		}
		return &Error{msg: fmt.Sprintf("notify %s: %s", s, redact.URLs(strings.ReplaceAll(msg, s.URL, "URL")))}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), c.now()),
		msg: fmt.Sprintf("notify %s: %s", s, resp.Status)}
	// What the service said, without the URL (a Slack webhook's is its
	// secret) should it quote it.
	said := strings.ToValidUTF8(string(snippet), "?")
	if u, err := url.Parse(s.URL); err == nil && len(u.Path) > 1 {
		said = strings.ReplaceAll(said, u.Path, "/…")
	}
	if said = strings.TrimSpace(redact.URLs(said)); said != "" {
		e.msg += ": " + said
	}
	return e
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) client() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultClient
}

var defaultClient = &http.Client{
	Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date; zero
// when absent or past. It is capped at an hour.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.Atoi(v); err == nil {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), time.Hour)
}
