package podexec

// Truncated ends output that was cut (seed 002).
const Truncated = "... [truncated]"

// Capped is an io.Writer that keeps at most Limit bytes and counts the
// rest.
type Capped struct {
	Limit int
	buf   []byte
	total int64
}

// Write implements io.Writer; it never fails.
func (c *Capped) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.Limit - len(c.buf); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		c.buf = append(c.buf, p[:room]...)
	}
	return len(p), nil
}

// Cut reports whether output was dropped.
func (c *Capped) Cut() bool { return c.total > int64(len(c.buf)) }

// String is what was kept, ending in Truncated when output was dropped.
func (c *Capped) String() string {
	if c.Cut() {
		return string(c.buf) + Truncated
	}
	return string(c.buf)
}

// Bytes is what was kept.
func (c *Capped) Bytes() []byte { return c.buf }
