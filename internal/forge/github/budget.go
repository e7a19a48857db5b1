package github

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Budget defaults.
const (
	// DefaultRate is requests per second when BudgetOptions.Rate is 0.
	DefaultRate = 10
	// DefaultWriteRate is writes (POST, PATCH, PUT, DELETE) per second
	// when BudgetOptions.WriteRate is 0: GitHub asks for at least a
	// second between content-creating requests.
	DefaultWriteRate = 1
	// DefaultMaxInFlight is concurrent requests when
	// BudgetOptions.MaxInFlight is 0.
	DefaultMaxInFlight = 4
	// DefaultMaxRetries is retries of one request when
	// BudgetOptions.MaxRetries is 0.
	DefaultMaxRetries = 5
	// DefaultBackoff is the first wait after a server error when
	// BudgetOptions.Backoff is 0; it doubles with every retry.
	DefaultBackoff = time.Second
	// DefaultMaxBackoff caps the backoff after server errors.
	DefaultMaxBackoff = time.Minute
	// DefaultSecondaryWait is the first wait after a secondary rate limit
	// that names no time, as GitHub documents ("at least one minute").
	DefaultSecondaryWait = time.Minute
	// maxSecondaryWait caps the growing wait after repeated secondary
	// rate limits.
	maxSecondaryWait = 16 * time.Minute
)

// ErrRateLimited is returned (wrapped) when the forge keeps refusing a
// request for its rate limit after every retry, or when the end of the
// wait lies beyond the request context's deadline. It is transient: the
// same request succeeds later.
var ErrRateLimited = errors.New("forge rate limit exceeded")

// ErrUnavailable is returned (wrapped) when the forge answers a request
// with server errors after every retry. It is transient.
var ErrUnavailable = errors.New("forge unavailable")

// BudgetOptions configure a Budget. The zero value means the defaults.
type BudgetOptions struct {
	// Rate is requests per second across every caller of the budget;
	// 0 means DefaultRate, a negative value no limit.
	Rate float64
	// Burst is how many requests may start at once after a quiet spell;
	// 0 means Rate rounded up.
	Burst int
	// WriteRate is writes per second, on top of Rate; 0 means
	// DefaultWriteRate, a negative value no limit.
	WriteRate float64
	// WriteBurst is WriteRate's burst; 0 means 1.
	WriteBurst int
	// MaxInFlight is how many requests may run at once; 0 means
	// DefaultMaxInFlight.
	MaxInFlight int
	// MaxRetries is how often one request is retried after a rate limit
	// or a server error; 0 means DefaultMaxRetries, a negative value none.
	MaxRetries int
	// Backoff is the first wait after a server error (5xx) or a failed
	// connection; 0 means DefaultBackoff. It doubles with every retry up
	// to MaxBackoff (0 means DefaultMaxBackoff), and each wait is
	// lengthened by up to half at random.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// SecondaryWait is the first wait after a secondary rate limit that
	// names no time; 0 means DefaultSecondaryWait. It doubles with every
	// retry (up to 16 minutes) and is jittered.
	SecondaryWait time.Duration
	// Logger receives a warning whenever the budget holds requests back
	// for a rate limit; nil means no logging.
	Logger *slog.Logger
	// OnRateLimitWait, when set, is called before each wait for a rate
	// limit the forge reported, with its length (metrics). It must
	// return quickly.
	OnRateLimitWait func(time.Duration)
	// Shared, when set, is the account's budget of writes shared with
	// every other process that writes with it (one owner holds its
	// count): each write waits for its permit there instead of
	// WriteRate's bucket, and a rate limit the forge reports holds every
	// process's writes back, not this one's alone.
	Shared Shared
	// SharedRequests, when set, is the account's budget of every request,
	// reads and writes (requests_per_hour), shared the same way: each
	// request, and each retry of one, waits for its permit there first.
	// A rate limit the forge reports holds it back too.
	SharedRequests Shared
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Sleep waits for d or until ctx is done; nil means a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// ErrSharedUnavailable is returned (wrapped) by a Shared that cannot
// serve permits now (no process serves the shared budget): a write
// waits for this process's own write bucket instead, and a request or a
// transfer is bounded by this process alone.
var ErrSharedUnavailable = errors.New("the shared budget is not served")

// Shared is a forge account's budget of writes held by one owner for
// every process (package dispatch's ForgeBudget, a Temporal workflow).
type Shared interface {
	// Acquire returns once the caller may send one write.
	Acquire(ctx context.Context) error
	// Hold holds every writer back until until: the forge answered a
	// request with a rate limit (reason says how).
	Hold(ctx context.Context, until time.Time, reason string) error
}

// Budget is one forge account's request allowance, shared by every Forge
// and every campaign that uses the account. Every request goes through
// it (see Transport): it spaces requests with a token bucket, bounds how
// many run at once and, when the forge says a rate limit is exhausted,
// holds back every caller until the forge's reset time before retrying.
// A Budget is safe for concurrent use.
type Budget struct {
	opts   BudgetOptions
	log    *slog.Logger
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
	slots  chan struct{}
	jitter func(d time.Duration) time.Duration

	// fallbacks counts writes paced locally because the shared budget
	// was not served; requestFallbacks, requests not counted in the
	// shared budget of requests for the same reason.
	fallbacks        atomic.Int64
	requestFallbacks atomic.Int64

	mu     sync.Mutex
	reads  bucket
	writes bucket
	// until is when the forge accepts requests again; zero or past
	// means now.
	until time.Time
}

// NewBudget returns a budget configured by o.
func NewBudget(o BudgetOptions) *Budget {
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Burst <= 0 {
		o.Burst = max(1, int(o.Rate+0.999))
	}
	if o.WriteRate == 0 {
		o.WriteRate = DefaultWriteRate
	}
	if o.WriteBurst <= 0 {
		o.WriteBurst = 1
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = DefaultMaxRetries
	case o.MaxRetries < 0:
		o.MaxRetries = 0
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.SecondaryWait <= 0 {
		o.SecondaryWait = DefaultSecondaryWait
	}
	b := &Budget{
		opts:   o,
		log:    o.Logger,
		now:    o.Now,
		sleep:  o.Sleep,
		slots:  make(chan struct{}, o.MaxInFlight),
		jitter: func(d time.Duration) time.Duration { return d + rand.N(d/2+1) },
		reads:  bucket{rate: o.Rate, burst: float64(o.Burst), tokens: float64(o.Burst)},
		writes: bucket{rate: o.WriteRate, burst: float64(o.WriteBurst), tokens: float64(o.WriteBurst)},
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.sleep == nil {
		b.sleep = sleep
	}
	return b
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// bucket is a token bucket; rate < 0 means unlimited.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

// take takes a token, going into debt if there is none, and returns how
// long the caller must wait for the token it took.
func (k *bucket) take(now time.Time) time.Duration {
	if k.rate < 0 {
		return 0
	}
	if !k.last.IsZero() && now.After(k.last) {
		k.tokens = min(k.burst, k.tokens+now.Sub(k.last).Seconds()*k.rate)
	}
	if k.last.IsZero() || now.After(k.last) {
		k.last = now
	}
	k.tokens--
	if k.tokens >= 0 {
		return 0
	}
	return time.Duration(-k.tokens / k.rate * float64(time.Second))
}

// give returns a token that was taken but not used.
func (k *bucket) give() {
	if k.rate >= 0 {
		k.tokens = min(k.burst, k.tokens+1)
	}
}

// Transport returns a RoundTripper that sends every request through the
// budget to next (nil means http.DefaultTransport). Requests that meet a
// rate limit are retried: the forge refused them without acting. After a
// server error or a failed connection, when the forge may have acted,
// only requests that are safe to repeat are retried: GET, HEAD, OPTIONS,
// PUT and DELETE, and writes whose context Idempotent marked; the answer
// to any other write is returned as it came (see API.Create). A request
// body is replayed with Request.GetBody, and a request with a body but no
// GetBody is not retried.
//
// The transport consumes the rate-limit headers it acted on
// (X-RateLimit-Reset, Retry-After) before handing a response up, so a
// client library's own rate-limit bookkeeping (go-github fails requests
// early instead of waiting) never duplicates the budget's.
func (b *Budget) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{b: b, next: next}
}

type transport struct {
	b    *Budget
	next http.RoundTripper
}

func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

func isIdempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

type idempotentKey struct{}

// Idempotent returns ctx marking the requests made with it as safe to
// send again when their outcome is unknown: writes that leave the forge
// the same however often they arrive, such as setting fields to values,
// adding labels or requesting reviewers. The budget retries them after a
// server error or a failed connection, as it does reads. A write that
// makes something new each time it arrives (a pull request, a comment)
// must not be marked: see API.Create.
func Idempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idempotentKey{}, true)
}

// repeatable reports whether req may be sent again after an answer that
// leaves its outcome unknown.
func repeatable(req *http.Request) bool {
	marked, _ := req.Context().Value(idempotentKey{}).(bool)
	return marked || isIdempotent(req.Method)
}

// verdict is what a response means for the budget.
type verdict int

const (
	verdictDone verdict = iota
	// verdictLimited: a rate limit; every caller waits.
	verdictLimited
	// verdictServer: a server error; this caller backs off.
	verdictServer
)

// RoundTrip sends req when the budget allows, holding a slot until the
// response headers arrive, and retries it as Transport describes. A
// response it does not retry is returned as the forge sent it, less the
// rate-limit headers it acted on; when it gives up it returns an error
// wrapping ErrRateLimited or ErrUnavailable.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	b := t.b
	ctx := req.Context()
	write := isWrite(req.Method)
	for attempt := 0; ; attempt++ {
		r := req
		if attempt > 0 {
			var err error
			if r, err = replay(req); err != nil {
				return nil, err
			}
		}
		if err := b.wait(ctx, write); err != nil {
			return nil, err
		}
		resp, err := t.next.RoundTrip(r)
		<-b.slots
		last := attempt >= b.opts.MaxRetries || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil)
		if err != nil {
			if ctx.Err() != nil || last || !repeatable(req) {
				return nil, err
			}
			if err := b.sleep(ctx, b.backoff(b.opts.Backoff, attempt, b.opts.MaxBackoff)); err != nil {
				return nil, err
			}
			continue
		}

		v, until := b.judge(resp, attempt)
		switch v {
		case verdictDone:
			consumeRateHeaders(resp)
			return resp, nil
		case verdictLimited:
			b.pause(until, req, resp.StatusCode)
			if last {
				discard(resp)
				return nil, fmt.Errorf("%w: %s after %d attempts (retry after %s)",
					ErrRateLimited, resp.Status, attempt+1, until.UTC().Format(time.RFC3339))
			}
			discard(resp)
		case verdictServer:
			if !repeatable(req) {
				// The forge may have acted: whoever made the request
				// finds out before sending it again.
				consumeRateHeaders(resp)
				return resp, nil
			}
			discard(resp)
			if last {
				return nil, fmt.Errorf("%w: %s after %d attempts", ErrUnavailable, resp.Status, attempt+1)
			}
			if err := b.sleep(ctx, b.backoff(b.opts.Backoff, attempt, b.opts.MaxBackoff)); err != nil {
				return nil, err
			}
		}
	}
}

// replay is a copy of req with a fresh body for another attempt.
func replay(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return r, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("replay request body: %w", err)
	}
	r.Body = body
	return r, nil
}

func discard(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

func consumeRateHeaders(resp *http.Response) {
	resp.Header.Del("X-RateLimit-Reset")
	resp.Header.Del("Retry-After")
}

// backoff is base doubled attempt times, capped at limit, then
// lengthened by up to half at random so that callers who failed together
// do not retry together.
func (b *Budget) backoff(base time.Duration, attempt int, limit time.Duration) time.Duration {
	d := base
	for range attempt {
		if d >= limit {
			break
		}
		d *= 2
	}
	return b.jitter(min(d, max(limit, base)))
}

// judge classifies a response. For a rate limit it returns when the
// forge accepts requests again. A successful response that used up the
// primary limit pauses the budget until its reset too, so the next
// request does not waste itself on a refusal.
func (b *Budget) judge(resp *http.Response, attempt int) (verdict, time.Time) {
	h := resp.Header
	now := b.now()
	switch resp.StatusCode {
	case http.StatusForbidden, http.StatusTooManyRequests:
		if d, ok := retryAfter(h.Get("Retry-After"), now); ok {
			return verdictLimited, now.Add(d)
		}
		if h.Get("X-RateLimit-Remaining") == "0" {
			if until, ok := b.reset(resp, now); ok {
				return verdictLimited, until
			}
			return verdictLimited, now.Add(b.backoff(b.opts.SecondaryWait, attempt, maxSecondaryWait))
		}
		if resp.StatusCode == http.StatusTooManyRequests || secondaryLimit(resp) {
			return verdictLimited, now.Add(b.backoff(b.opts.SecondaryWait, attempt, maxSecondaryWait))
		}
		return verdictDone, time.Time{}
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if d, ok := retryAfter(h.Get("Retry-After"), now); ok && resp.StatusCode == http.StatusServiceUnavailable {
			return verdictLimited, now.Add(d)
		}
		return verdictServer, time.Time{}
	}
	if resp.StatusCode < 300 && h.Get("X-RateLimit-Remaining") == "0" {
		if until, ok := b.reset(resp, now); ok {
			b.pause(until, resp.Request, resp.StatusCode)
		}
	}
	return verdictDone, time.Time{}
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

// reset is when the primary limit resets, by the X-RateLimit-Reset
// header (epoch seconds). The wait is measured against the response's
// Date header when there is one, so a skewed local clock neither cuts
// it short nor stretches it.
func (b *Budget) reset(resp *http.Response, now time.Time) (time.Time, bool) {
	sec, err := strconv.ParseInt(strings.TrimSpace(resp.Header.Get("X-RateLimit-Reset")), 10, 64)
	if err != nil || sec <= 0 {
		return time.Time{}, false
	}
	reset := time.Unix(sec, 0)
	server := now
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		server = d
	}
	return now.Add(max(0, reset.Sub(server))), true
}

// secondaryLimit reports whether a 403 says a secondary (formerly
// "abuse") rate limit was hit. It reads the start of the body and puts
// it back.
func secondaryLimit(resp *http.Response) bool {
	const n = 8 << 10
	head, err := io.ReadAll(io.LimitReader(resp.Body, n))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	if err != nil {
		return false
	}
	msg := strings.ToLower(string(head))
	return strings.Contains(msg, "secondary rate limit") || strings.Contains(msg, "abuse detection") ||
		strings.Contains(msg, "abuse-rate-limits")
}

// Share has b's writes wait for permits of s from now on (see
// BudgetOptions.Shared).
func (b *Budget) Share(s Shared) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opts.Shared = s
}

// ShareRequests has every request of b wait for a permit of s from now
// on (see BudgetOptions.SharedRequests).
func (b *Budget) ShareRequests(s Shared) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opts.SharedRequests = s
}

// SharedBudget is the shared write budget b's writes wait for, nil when
// there is none.
func (b *Budget) SharedBudget() Shared { return b.shared() }

// SharedRequestsBudget is the shared budget of requests every request
// of b waits for, nil when there is none.
func (b *Budget) SharedRequestsBudget() Shared { return b.sharedRequests() }

// shared is the shared write budget, nil when there is none.
func (b *Budget) shared() Shared {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opts.Shared
}

// sharedRequests is the shared budget of every request, nil when there
// is none.
func (b *Budget) sharedRequests() Shared {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opts.SharedRequests
}

// pause holds every caller back until until.
func (b *Budget) pause(until time.Time, req *http.Request, status int) {
	b.mu.Lock()
	extended := until.After(b.until)
	if extended {
		b.until = until
	}
	b.mu.Unlock()
	for what, shared := range map[string]Shared{"write budget": b.shared(), "budget of requests": b.sharedRequests()} {
		if shared == nil {
			continue
		}
		// Every process's requests wait too; the hold is in place
		// before this caller tries again.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := shared.Hold(ctx, until, fmt.Sprintf("HTTP %d", status))
		cancel()
		if err != nil {
			b.log.Warn("forge rate limit: could not hold the shared "+what+" back", "error", err)
		}
	}
	if extended {
		attrs := []any{"until", until.UTC().Format(time.RFC3339), "wait", until.Sub(b.now()).Round(time.Millisecond), "status", status}
		if req != nil && req.URL != nil {
			attrs = append(attrs, "method", req.Method, "host", req.URL.Host, "path", req.URL.Path)
		}
		b.log.Warn("forge rate limit: holding requests back", attrs...)
	}
}

// paused is how long callers must still wait for a rate limit.
func (b *Budget) paused() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.until.Sub(b.now())
}

// waitPause waits until no rate limit holds callers back. A wait that
// would end after ctx's deadline fails at once.
func (b *Budget) waitPause(ctx context.Context) error {
	for {
		d := b.paused()
		if d <= 0 {
			return nil
		}
		if deadline, ok := ctx.Deadline(); ok && b.now().Add(d).After(deadline) {
			return fmt.Errorf("%w: requests held back for %s, past the deadline", ErrRateLimited, d.Round(time.Second))
		}
		if b.opts.OnRateLimitWait != nil {
			b.opts.OnRateLimitWait(d)
		}
		if err := b.sleep(ctx, d); err != nil {
			return err
		}
	}
}

// wait returns when a request may start: no rate limit holds callers
// back, the token buckets allow it and a slot is free. The caller must
// release the slot (<-b.slots) when the request is done.
func (b *Budget) wait(ctx context.Context, write bool) error {
	if shared := b.sharedRequests(); shared != nil {
		err := shared.Acquire(ctx)
		switch {
		case errors.Is(err, ErrSharedUnavailable):
			if b.requestFallbacks.Add(1) == 1 {
				b.log.Warn("forge requests: the shared budget of requests is not served; this process's requests go uncounted there", "error", err)
			}
		case err != nil:
			return fmt.Errorf("%w: the account's shared budget of requests: %w", ErrRateLimited, err)
		}
	}
	if shared := b.shared(); write && shared != nil {
		err := shared.Acquire(ctx)
		switch {
		case errors.Is(err, ErrSharedUnavailable):
			// Paced by this process's own bucket, as without one.
			if b.fallbacks.Add(1) == 1 {
				b.log.Warn("forge writes: the shared write budget is not served; pacing this process's writes itself", "error", err)
			}
		case err != nil:
			return fmt.Errorf("%w: the account's shared write budget: %w", ErrRateLimited, err)
		default:
			// The permit is the write's; the local buckets count it as
			// a read.
			write = false
		}
	}
	taken := false
	giveBack := func() {
		b.mu.Lock()
		b.reads.give()
		if write {
			b.writes.give()
		}
		b.mu.Unlock()
	}
	for {
		if err := b.waitPause(ctx); err != nil {
			if taken {
				giveBack()
			}
			return err
		}
		if !taken {
			b.mu.Lock()
			now := b.now()
			d := b.reads.take(now)
			if write {
				d = max(d, b.writes.take(now))
			}
			b.mu.Unlock()
			taken = true
			if d > 0 {
				if err := b.sleep(ctx, d); err != nil {
					giveBack()
					return err
				}
				// A rate limit may have begun meanwhile.
				continue
			}
		}
		select {
		case b.slots <- struct{}{}:
		case <-ctx.Done():
			giveBack()
			return ctx.Err()
		}
		if b.paused() > 0 {
			<-b.slots
			continue
		}
		return nil
	}
}
