package gateway_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/gateway"
)

// files are sandboxes' protocol files, by sandbox id and name.
type files struct {
	mu sync.Mutex
	m  map[string]string
}

func (f *files) keys(gw *gateway.Gateway, url string) *gateway.Keys {
	return &gateway.Keys{
		Gateway: gw, URL: url,
		Read: func(_ context.Context, id, name string) ([]byte, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			v, ok := f.m[id+"/"+name]
			if !ok {
				return nil, fs.ErrNotExist
			}
			return []byte(v), nil
		},
		Write: func(_ context.Context, id, name string, data []byte) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.m == nil {
				f.m = map[string]string{}
			}
			f.m[id+"/"+name] = string(data)
			return nil
		},
	}
}

func (f *files) get(id, name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[id+"/"+name]
}

// A sandbox reached over the network gets its gateway's address beside
// its key. The same worker started again takes up the key it had; a
// worker at another address gives a new one, which its gateway alone
// takes, the sandbox's usage counting on.
func TestKeysMoveWithTheGateway(t *testing.T) {
	ctx := context.Background()
	m := &model{}
	upstream := m.serve(t)
	sandbox := &files{}

	a := &gateway.Gateway{Upstream: upstream, Key: realKey}
	if err := sandbox.keys(a, "http://10.0.0.1:8090").Open(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	keyA := sandbox.get("s1", "gateway-key")
	if got := sandbox.get("s1", "gateway-url"); got != "http://10.0.0.1:8090" {
		t.Errorf("gateway-url = %q; want the worker's address", got)
	}
	if code, _ := call(t, a, keyA, false); code != http.StatusOK {
		t.Fatalf("a call with the sandbox's key: %d", code)
	}
	// The gateway saves what the sandbox used beside its key, off the
	// call's path.
	used, _ := a.Usage(keyA)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var saved gateway.Usage
		if json.Unmarshal([]byte(sandbox.get("s1", "usage.json")), &saved) == nil && saved == used {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox's usage %+v was not saved", used)
		}
	}

	// The same worker, started again at the same address.
	again := &gateway.Gateway{Upstream: upstream, Key: realKey}
	if err := sandbox.keys(again, "http://10.0.0.1:8090").Open(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if got := sandbox.get("s1", "gateway-key"); got != keyA {
		t.Errorf("the worker started again gave a new key")
	}
	if u, ok := again.Usage(keyA); !ok || u != used {
		t.Errorf("the worker started again takes the sandbox's key: %v, with usage %+v; want %+v", ok, u, used)
	}

	// Another worker takes the sandbox over.
	b := &gateway.Gateway{Upstream: upstream, Key: realKey}
	if err := sandbox.keys(b, "http://10.0.0.2:8090").Open(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	keyB := sandbox.get("s1", "gateway-key")
	if keyB == keyA || keyB == "" {
		t.Fatalf("the worker that took the sandbox over kept its key")
	}
	if got := sandbox.get("s1", "gateway-url"); got != "http://10.0.0.2:8090" {
		t.Errorf("gateway-url = %q; want the new worker's address", got)
	}
	if code, _ := call(t, b, keyA, false); code != http.StatusUnauthorized {
		t.Errorf("the old key at the new worker: %d; want 401", code)
	}
	if u, _ := b.Usage(keyB); u != used {
		t.Errorf("usage at the new worker %+v; want the first call's, %+v, counted on", u, used)
	}
	if code, _ := call(t, b, keyB, false); code != http.StatusOK {
		t.Errorf("the new key at the new worker: %d", code)
	}
}
