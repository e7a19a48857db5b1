package github

import (
	"bytes"
	"container/list"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Bounds of a Forge's conditional-request cache.
const (
	// conditionalEntries is how many answers are kept, the least
	// recently used dropped first.
	conditionalEntries = 2048
	// conditionalMaxBody is the largest answer kept.
	conditionalMaxBody = 1 << 20
)

// conditional makes a Forge's reads conditional requests: it keeps, per
// URL, the last full answer that carried an ETag or Last-Modified, sends
// the next GET of that URL with If-None-Match (or If-Modified-Since),
// and hands a 304 up as the answer it kept. GitHub does not count a 304
// to an authorised request against the rate limit, so following pull
// requests that did not change costs none of it. A Forge has one token,
// so the answers are all its own to see. Safe for concurrent use.
type conditional struct {
	next http.RoundTripper

	mu      sync.Mutex
	entries map[string]*list.Element
	order   *list.List // of *kept, most recently used first
}

// kept is one answer a conditional request may revalidate.
type kept struct {
	url          string
	etag, lastMo string
	status       string
	header       http.Header
	body         []byte
}

func newConditional(next http.RoundTripper) *conditional {
	return &conditional{next: next, entries: map[string]*list.Element{}, order: list.New()}
}

func (c *conditional) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.Header.Get("If-None-Match") != "" || req.Header.Get("If-Modified-Since") != "" || req.Header.Get("Range") != "" {
		return c.next.RoundTrip(req)
	}
	key := req.URL.String()
	k := c.lookup(key)
	r := req
	if k != nil {
		r = req.Clone(req.Context())
		if k.etag != "" {
			r.Header.Set("If-None-Match", k.etag)
		} else {
			r.Header.Set("If-Modified-Since", k.lastMo)
		}
	}
	resp, err := c.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && k != nil:
		resp.Body.Close()
		h := k.header.Clone()
		// The rate-limit headers are the 304's: they are current.
		for name, v := range resp.Header {
			if strings.HasPrefix(strings.ToLower(name), "x-ratelimit-") {
				h[name] = v
			}
		}
		return &http.Response{
			Status: k.status, StatusCode: http.StatusOK, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
			Header: h, Body: io.NopCloser(bytes.NewReader(k.body)), ContentLength: int64(len(k.body)), Request: req,
		}, nil
	case resp.StatusCode == http.StatusOK && (resp.Header.Get("ETag") != "" || resp.Header.Get("Last-Modified") != ""):
		return c.keep(key, resp)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		c.forget(key)
	}
	return resp, nil
}

// keep reads resp's body and keeps the answer when it is small enough,
// returning a response that reads the same body.
func (c *conditional) keep(key string, resp *http.Response) (*http.Response, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, conditionalMaxBody+1))
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	if len(body) > conditionalMaxBody {
		// Too large to keep: hand it up whole, unkept.
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	k := &kept{url: key, etag: resp.Header.Get("ETag"), lastMo: resp.Header.Get("Last-Modified"),
		status: resp.Status, header: resp.Header.Clone(), body: body}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.order.Remove(e)
	}
	c.entries[key] = c.order.PushFront(k)
	for c.order.Len() > conditionalEntries {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.entries, old.Value.(*kept).url)
	}
	return resp, nil
}

func (c *conditional) lookup(key string) *kept {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*kept)
}

func (c *conditional) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.order.Remove(e)
		delete(c.entries, key)
	}
}
