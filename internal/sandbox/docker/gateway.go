package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync/atomic"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/gateway"
)

// gatewaySandbox is what the model gateway needs of sandbox id: its
// budget, read from the manifest in its protocol directory once the
// worker wrote it, and where what it used goes.
func (p *Provider) gatewaySandbox(id string) gateway.Sandbox {
	var limit atomic.Int64
	return gateway.Sandbox{
		ID: id,
		Limit: func() int64 {
			if n := limit.Load(); n != 0 {
				return n
			}
			rc, err := p.CopyFrom(context.Background(), id, protocol.Dir+"/"+protocol.ManifestFile)
			if err != nil {
				return 0
			}
			defer rc.Close()
			var m protocol.Manifest
			if json.NewDecoder(rc).Decode(&m) != nil {
				return 0
			}
			n := int64(m.Limits.MaxTokens)
			if n <= 0 {
				n = -1 // none, and read no more
			}
			limit.Store(n)
			return n
		},
		Save: func(u gateway.Usage) {
			if data, err := json.Marshal(u); err == nil {
				_ = p.CopyTo(context.Background(), id, bytes.NewReader(data), protocol.Dir+"/"+protocol.UsageFile)
			}
		},
	}
}

// openGateway gives sandbox id a key to the model gateway in its protocol
// directory, or takes up the key it already has (a Provision again, or a
// worker started again on its containers), counting on from what it used.
func (p *Provider) openGateway(ctx context.Context, id string) error {
	if p.gateway == nil {
		return nil
	}
	p.mu.Lock()
	_, ok := p.gwKeys[id]
	p.mu.Unlock()
	if ok {
		return nil
	}
	keyFile := protocol.Dir + "/" + protocol.GatewayKeyFile
	sb := p.gatewaySandbox(id)
	if rc, err := p.CopyFrom(ctx, id, keyFile); err == nil {
		data, _ := io.ReadAll(io.LimitReader(rc, 256))
		rc.Close()
		var used gateway.Usage
		if rc, err := p.CopyFrom(ctx, id, protocol.Dir+"/"+protocol.UsageFile); err == nil {
			_ = json.NewDecoder(rc).Decode(&used)
			rc.Close()
		}
		key := strings.TrimSpace(string(data))
		if p.gateway.Adopt(key, sb, used) == nil {
			p.mu.Lock()
			p.gwKeys[id] = key
			p.mu.Unlock()
			return nil
		}
	}
	key, err := p.gateway.Open(sb)
	if err != nil {
		return err
	}
	if err := p.CopyTo(ctx, id, strings.NewReader(key), keyFile); err != nil {
		p.gateway.Close(key)
		return err
	}
	p.mu.Lock()
	p.gwKeys[id] = key
	p.mu.Unlock()
	return nil
}

// closeGateway ends sandbox id's calls to the model gateway.
func (p *Provider) closeGateway(id string) {
	if p.gateway == nil {
		return
	}
	p.mu.Lock()
	key, ok := p.gwKeys[id]
	delete(p.gwKeys, id)
	p.mu.Unlock()
	if ok {
		p.gateway.Close(key)
	}
}
