package forgetest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Window is a limit of a Paced forge: at most Count writes in any Per.
type Window struct {
	Count int
	Per   time.Duration
}

// Paced is a forge that takes writes (POST …/pulls, the request that
// opens a pull request) and enforces GitHub's secondary limits on them
// as windows: a write past any window's count is refused with 403 "You
// have exceeded a secondary rate limit" and not recorded. When
// RetryAfterAt is set, the write of that number is refused once with
// Retry-After instead, at HeldFrom. Set the fields before serving.
type Paced struct {
	Limits       []Window
	RetryAfterAt int
	RetryAfter   time.Duration

	mu       sync.Mutex
	writes   []time.Time
	refused  int
	heldFrom time.Time
}

// ServeHTTP takes or refuses a write.
func (f *Paced) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/pulls") {
		http.NotFound(w, r)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	w.Header().Set("Content-Type", "application/json")
	if f.RetryAfterAt > 0 && len(f.writes)+1 == f.RetryAfterAt && f.heldFrom.IsZero() {
		f.heldFrom = now
		w.Header().Set("Retry-After", fmt.Sprint(int(f.RetryAfter/time.Second)))
		limited(w)
		return
	}
	for _, l := range f.Limits {
		n := 0
		for i := len(f.writes) - 1; i >= 0 && now.Sub(f.writes[i]) < l.Per; i-- {
			n++
		}
		if n >= l.Count {
			f.refused++
			limited(w)
			return
		}
	}
	f.writes = append(f.writes, now)
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"number":%d}`, len(f.writes))
}

func limited(w http.ResponseWriter) {
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprint(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`)
}

// Writes are the times of the writes taken, in order.
func (f *Paced) Writes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.writes...)
}

// Refused counts the writes refused for a window.
func (f *Paced) Refused() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

// HeldFrom is when the Retry-After answer went out; zero before.
func (f *Paced) HeldFrom() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heldFrom
}
