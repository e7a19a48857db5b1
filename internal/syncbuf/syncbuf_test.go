package syncbuf

import (
	"fmt"
	"sync"
	"testing"
)

// Lines written from many goroutines at once all arrive whole, and Tail
// gives the last ones.
func TestConcurrentWritesArriveWhole(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				fmt.Fprintf(&b, "g%d line %03d\n", g, i)
			}
		})
	}
	wg.Wait()
	if got := len(b.String()); got != 8*100*len("g0 line 000\n") {
		t.Fatalf("%d bytes written; want %d", got, 8*100*len("g0 line 000\n"))
	}
	b.Write([]byte("second to last\nlast\n"))
	if got := b.Tail(2); got != "second to last\nlast" {
		t.Fatalf("Tail(2) = %q", got)
	}
	var empty Buffer
	if got := empty.Tail(3); got != "" {
		t.Fatalf("Tail of nothing = %q", got)
	}
}
