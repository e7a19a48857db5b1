package gateway

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

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
// their protocol directories (protocol.GatewayKeyFile), through Files.
type Keys struct {
	Gateway *Gateway
	Files   Files

	mu   sync.Mutex
	keys map[string]string // by sandbox id
}

// sandbox is what the gateway needs of sandbox id (ProtocolSandbox).
func (k *Keys) sandbox(id string) Sandbox {
	return ProtocolSandbox(id,
		func(name string) ([]byte, error) {
			rc, err := k.Files.CopyFrom(context.Background(), id, path.Join(protocol.Dir, name))
			if err != nil {
				return nil, err
			}
			defer rc.Close()
			return io.ReadAll(io.LimitReader(rc, 4<<20))
		},
		func(name string, data []byte) error {
			return k.Files.CopyTo(context.Background(), id, strings.NewReader(string(data)), path.Join(protocol.Dir, name))
		})
}

// Open gives sandbox id a key to the gateway, or takes up the key it
// already has (a Provision again, or a worker started again on its
// sandboxes), counting on from what it used. A nil Keys does nothing.
func (k *Keys) Open(ctx context.Context, id string) error {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	_, ok := k.keys[id]
	k.mu.Unlock()
	if ok {
		return nil
	}
	keyFile := path.Join(protocol.Dir, protocol.GatewayKeyFile)
	sb := k.sandbox(id)
	if rc, err := k.Files.CopyFrom(ctx, id, keyFile); err == nil {
		data, _ := io.ReadAll(io.LimitReader(rc, 256))
		rc.Close()
		var used Usage
		if rc, err := k.Files.CopyFrom(ctx, id, path.Join(protocol.Dir, protocol.UsageFile)); err == nil {
			_ = json.NewDecoder(io.LimitReader(rc, 1<<20)).Decode(&used)
			rc.Close()
		}
		key := strings.TrimSpace(string(data))
		if k.Gateway.Adopt(key, sb, used) == nil {
			k.keep(id, key)
			return nil
		}
	}
	key, err := k.Gateway.Open(sb)
	if err != nil {
		return err
	}
	if err := k.Files.CopyTo(ctx, id, strings.NewReader(key), keyFile); err != nil {
		k.Gateway.Close(key)
		return err
	}
	k.keep(id, key)
	return nil
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
