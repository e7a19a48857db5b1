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

// Steps that reach a sandbox at once on a worker that has not taken it
// over yet (the status poll and a read of the result) give it one key:
// the one on file is the one the gateway takes, and no other was made.
func TestKeysTakeOverOnce(t *testing.T) {
	ctx := context.Background()
	m := &model{}
	upstream := m.serve(t)
	sandbox := &files{}
	if err := sandbox.keys(&gateway.Gateway{Upstream: upstream, Key: realKey}, "http://10.0.0.1:8090").Open(ctx, "s1"); err != nil {
		t.Fatal(err)
	}

	b := &gateway.Gateway{Upstream: upstream, Key: realKey}
	keys := sandbox.keys(b, "http://10.0.0.2:8090")
	var mu sync.Mutex
	// The first step to read where the sandbox's gateway is waits a
	// moment, with what it read, for a second one to read it too, as a
	// slow exec would let it.
	second := make(chan struct{})
	var readers sync.Once
	var reads int
	read := keys.Read
	keys.Read = func(ctx context.Context, id, name string) ([]byte, error) {
		data, err := read(ctx, id, name)
		if name == "gateway-url" {
			mu.Lock()
			reads++
			n := reads
			mu.Unlock()
			if n == 2 {
				readers.Do(func() { close(second) })
			}
			if n == 1 {
				select {
				case <-second:
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		return data, err
	}
	given := map[string]bool{}
	write := keys.Write
	keys.Write = func(ctx context.Context, id, name string, data []byte) error {
		if name == "gateway-key" {
			mu.Lock()
			given[string(data)] = true
			mu.Unlock()
		}
		return write(ctx, id, name, data)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := keys.Open(ctx, "s1"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(given) != 1 {
		t.Fatalf("16 steps at once gave the sandbox %d keys; want 1", len(given))
	}
	if code, _ := call(t, b, sandbox.get("s1", "gateway-key"), false); code != http.StatusOK {
		t.Errorf("a call with the key on file: %d", code)
	}
}

// A worker whose sandbox another worker took over lets go of the key it
// gave (its gateway refuses it from then on), and takes the sandbox back
// when it uses it again. One whose sandbox is still its own keeps it.
func TestKeysCloseMoved(t *testing.T) {
	ctx := context.Background()
	m := &model{}
	upstream := m.serve(t)
	sandbox := &files{}
	a := &gateway.Gateway{Upstream: upstream, Key: realKey}
	keysA := sandbox.keys(a, "http://10.0.0.1:8090")
	if err := keysA.Open(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	keyA := sandbox.get("s1", "gateway-key")
	if keysA.CloseMoved(ctx, "s1") {
		t.Fatal("a worker let go of a sandbox that is still its own")
	}
	if code, _ := call(t, a, keyA, false); code != http.StatusOK {
		t.Fatalf("a call with the sandbox's key: %d", code)
	}

	b := &gateway.Gateway{Upstream: upstream, Key: realKey}
	if err := sandbox.keys(b, "http://10.0.0.2:8090").Open(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if !keysA.CloseMoved(ctx, "s1") {
		t.Fatal("the first worker kept the key of a sandbox another took over")
	}
	if code, _ := call(t, a, keyA, false); code != http.StatusUnauthorized {
		t.Errorf("the old key at the first worker once the sandbox moved: %d; want 401", code)
	}

	// The first worker uses the sandbox again (the task's next step
	// landed there): it takes the sandbox back, with a new key.
	if err := keysA.Open(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if got := sandbox.get("s1", "gateway-url"); got != "http://10.0.0.1:8090" {
		t.Errorf("gateway-url = %q; want the first worker's again", got)
	}
	if key := sandbox.get("s1", "gateway-key"); key == keyA {
		t.Error("the sandbox taken back got its old key again")
	} else if code, _ := call(t, a, key, false); code != http.StatusOK {
		t.Errorf("a call with the new key at the first worker: %d", code)
	}
}
