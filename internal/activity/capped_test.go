package activity

import (
	"io"
	"strings"
	"testing"
)

// A change of exactly the size allowed reads whole; one byte more is
// refused, and said to be over.
func TestCappedRefusesWhatIsOverTheSize(t *testing.T) {
	c := &capped{r: strings.NewReader("12345"), left: 5}
	if b, err := io.ReadAll(c); string(b) != "12345" || err != nil || c.over {
		t.Fatalf("read %q, %v, over %v; want all of it", b, err, c.over)
	}
	c = &capped{r: strings.NewReader("123456"), left: 5}
	if _, err := io.ReadAll(c); err == nil || !c.over {
		t.Fatalf("read six bytes of five allowed: %v, over %v", err, c.over)
	}
}
