package podexec

import "sync"

// Truncated ends output that was cut (seed 002).
const Truncated = "... [truncated]"

// Capped is an io.Writer that keeps at most Limit bytes and counts the
// rest. It is safe for concurrent use: an executor may still be copying
// output when its caller, whose context ended, reads what it has.
type Capped struct {
	Limit int

	mu    sync.Mutex
	buf   []byte
	total int64
}

// Write implements io.Writer; it never fails.
func (c *Capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.Limit - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Cut reports whether output was dropped.
func (c *Capped) Cut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > int64(len(c.buf))
}

// String is what was kept, ending in Truncated when output was dropped.
func (c *Capped) String() string {
	if c.Cut() {
		return string(c.Bytes()) + Truncated
	}
	return string(c.Bytes())
}

// Bytes is a copy of what was kept.
func (c *Capped) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}
