package listen

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestTakenAddress: an address another listener holds is one line that
// names the flag and the address; any other failure keeps its cause.
func TestTakenAddress(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	_, err = TCP("metrics-listen", addr)
	var inUse *InUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("TCP on a taken address: %v, want an *InUseError", err)
	}
	if msg := err.Error(); msg != "--metrics-listen "+addr+": the address is already in use (another fleetlift running?)" {
		t.Errorf("message %q", msg)
	}
	_, err = TCP("ui-listen", "127.0.0.1:notaport")
	if err == nil || errors.As(err, &inUse) || !strings.HasPrefix(err.Error(), "--ui-listen 127.0.0.1:notaport: ") {
		t.Errorf("TCP on a bad address: %v", err)
	}
	ln, err := TCP("webhook-listen", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("TCP on a free port: %v", err)
	}
	ln.Close()
}

// TestExplainKeepsOtherErrors: only a taken address is reworded; an error
// of something else (a database that would not open) stays as it was.
func TestExplainKeepsOtherErrors(t *testing.T) {
	other := errors.New("open temporal.db: permission denied")
	if got := Explain("temporal-address", "127.0.0.1:7233", other); got != other {
		t.Errorf("Explain(%v) = %v", other, got)
	}
	if Explain("temporal-address", "127.0.0.1:7233", nil) != nil {
		t.Error("Explain(nil) is not nil")
	}
}

// TestFreePorts: the ports are distinct, none of those excepted, free to
// bind once returned, and below the ephemeral range, where no connection
// takes one as its source port between finding and binding it.
func TestFreePorts(t *testing.T) {
	low := ephemeralLow()
	except := []int{low/2 + 1, low/2 + 2}
	ports, err := FreePorts("127.0.0.1", 20, except...)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 20 {
		t.Fatalf("%d ports, want 20", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d found twice", p)
		}
		seen[p] = true
		if slices.Contains(except, p) {
			t.Errorf("port %d was excepted", p)
		}
		if p >= low || p < low/2 {
			t.Errorf("port %d is outside [%d, %d)", p, low/2, low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		l.Close()
	}
	addr, err := FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("FreeAddr %s: %v", addr, err)
	}
	l.Close()
}
