package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// Files reads and writes a sandbox's files, paths relative to its
// workspace, as sandbox providers whose sandboxes are not on the worker's
// file system (containers, pods) do.
type Files interface {
	CopyTo(ctx context.Context, id string, src io.Reader, dest string) error
	CopyFrom(ctx context.Context, id, src string) (io.ReadCloser, error)
}

// Keys hands the sandboxes of a provider their keys to a Gateway, in
// their protocol directories (protocol.GatewayKeyFile).
type Keys struct {
	Gateway *Gateway
	// URL, when set, is where the sandboxes reach the gateway over the
	// network (Kubernetes pods), written beside each key
	// (protocol.GatewayURLFile), where the agent's relay reads it. A
	// sandbox whose file names another address, or none, was another
	// gateway's (a worker that is gone): Open gives it a new key, its
	// usage counting on, and never takes up the one it had.
	URL string
	// Read and Write are sandbox id's protocol file name (relative to
	// protocol.Dir), as its provider reads and writes it.
	Read  func(ctx context.Context, id, name string) ([]byte, error)
	Write func(ctx context.Context, id, name string, data []byte) error

	mu   sync.Mutex
	keys map[string]string // by sandbox id
	// busy serializes Open and CloseMoved of one sandbox: two steps
	// that reach a sandbox at once (two activities on a worker that
	// has not taken it over yet) give it one key, not two, the first
	// of which would stay open.
	busy map[string]*idLock
}

// idLock is one sandbox's lock in Keys.busy; n counts who holds or
// waits for it.
type idLock struct {
	sync.Mutex
	n int
}

// lock locks sandbox id's Open and CloseMoved; it returns the unlock.
func (k *Keys) lock(id string) (unlock func()) {
	k.mu.Lock()
	if k.busy == nil {
		k.busy = map[string]*idLock{}
	}
	l := k.busy[id]
	if l == nil {
		l = &idLock{}
		k.busy[id] = l
	}
	l.n++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.n--; l.n == 0 {
			delete(k.busy, id)
		}
		k.mu.Unlock()
	}
}

// FileKeys are the Keys of a provider whose sandboxes' files are read and
// written through files (containers, pods).
func FileKeys(gw *Gateway, files Files) *Keys {
	return &Keys{
		Gateway: gw,
		Read: func(ctx context.Context, id, name string) ([]byte, error) {
			rc, err := files.CopyFrom(ctx, id, path.Join(protocol.Dir, name))
			if err != nil {
				return nil, err
			}
			defer rc.Close()
			return io.ReadAll(io.LimitReader(rc, 4<<20))
		},
		Write: func(ctx context.Context, id, name string, data []byte) error {
			return files.CopyTo(ctx, id, bytes.NewReader(data), path.Join(protocol.Dir, name))
		},
	}
}

// fileTimeout bounds each of the gateway's reads and writes of a
// sandbox's files.
const fileTimeout = 30 * time.Second

// sandbox is what the gateway needs of sandbox id (ProtocolSandbox).
func (k *Keys) sandbox(id string) Sandbox {
	return ProtocolSandbox(id,
		func(name string) ([]byte, error) {
			ctx, cancel := context.WithTimeout(context.Background(), fileTimeout)
			defer cancel()
			return k.Read(ctx, id, name)
		},
		func(name string, data []byte) error {
			ctx, cancel := context.WithTimeout(context.Background(), fileTimeout)
			defer cancel()
			return k.Write(ctx, id, name, data)
		})
}

// Open gives sandbox id a key to the gateway, or takes up the key it
// already has (a Provision again, or a worker started again on its
// sandboxes), counting on from what it used. A nil Keys does nothing.
//
// With a URL, a sandbox another gateway served is taken over instead:
// see Keys.URL.
//
// A sandbox that has a key from this Keys costs Open no read: call it
// before each use of a sandbox that another worker may have served.
// Calls for one sandbox take turns, so concurrent ones give one key.
func (k *Keys) Open(ctx context.Context, id string) error {
	if k == nil {
		return nil
	}
	if k.holds(id) {
		return nil
	}
	defer k.lock(id)()
	if k.URL != "" && !k.holds(id) {
		if data, err := k.Read(ctx, id, protocol.GatewayURLFile); err != nil || strings.TrimSpace(string(data)) != k.URL {
			return k.give(ctx, id, k.used(ctx, id))
		}
	}
	if k.Adopt(ctx, id) {
		return nil
	}
	return k.give(ctx, id, Usage{})
}

// give gives sandbox id a new key, counting on from used, and, with a
// URL, the gateway's address beside it.
func (k *Keys) give(ctx context.Context, id string, used Usage) error {
	key, err := k.Gateway.OpenFrom(k.sandbox(id), used)
	if err != nil {
		return err
	}
	if err := k.Write(ctx, id, protocol.GatewayKeyFile, []byte(key)); err != nil {
		k.Gateway.Close(key)
		return err
	}
	if k.URL != "" {
		if err := k.Write(ctx, id, protocol.GatewayURLFile, []byte(k.URL)); err != nil {
			k.Gateway.Close(key)
			return err
		}
	}
	k.keep(id, key)
	return nil
}

// used is what sandbox id's model calls used so far, as its last
// gateway saved it.
func (k *Keys) used(ctx context.Context, id string) Usage {
	var used Usage
	if u, err := k.Read(ctx, id, protocol.UsageFile); err == nil {
		_ = json.Unmarshal(u, &used)
	}
	return used
}

// holds reports whether sandbox id has a key from this Keys.
func (k *Keys) holds(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.keys[id]
	return ok
}

// Adopt takes up the key sandbox id already has, counting on from what
// it used, and reports whether it has one the gateway takes (or a key
// from this Keys already). It gives no new key.
func (k *Keys) Adopt(ctx context.Context, id string) bool {
	if k == nil {
		return false
	}
	if k.holds(id) {
		return true
	}
	data, err := k.Read(ctx, id, protocol.GatewayKeyFile)
	if err != nil {
		return false
	}
	key := strings.TrimSpace(string(data))
	if k.Gateway.Adopt(key, k.sandbox(id), k.used(ctx, id)) != nil {
		return false
	}
	k.keep(id, key)
	return true
}

func (k *Keys) keep(id, key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = map[string]string{}
	}
	k.keys[id] = key
}

// CloseMoved closes sandbox id's key when the sandbox's file names
// another gateway's address (Keys.URL): another worker took it over,
// and the key this one gave it is taken no more. It reports whether it
// closed the key; a sandbox whose file cannot be read keeps its key.
// The next Open takes the sandbox back.
func (k *Keys) CloseMoved(ctx context.Context, id string) bool {
	if k == nil || k.URL == "" || !k.holds(id) {
		return false
	}
	defer k.lock(id)()
	if !k.holds(id) {
		return false
	}
	data, err := k.Read(ctx, id, protocol.GatewayURLFile)
	if err != nil || strings.TrimSpace(string(data)) == k.URL {
		return false
	}
	k.Close(id)
	return true
}

// IDs are the sandboxes that have keys.
func (k *Keys) IDs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Sorted(maps.Keys(k.keys))
}

// Close ends sandbox id's use of the gateway. A nil Keys does nothing.
func (k *Keys) Close(id string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	key, ok := k.keys[id]
	delete(k.keys, id)
	k.mu.Unlock()
	if ok {
		k.Gateway.Close(key)
	}
}
