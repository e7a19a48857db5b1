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
func (k *Keys) Open(ctx context.Context, id string) error {
	if k == nil {
		return nil
	}
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
