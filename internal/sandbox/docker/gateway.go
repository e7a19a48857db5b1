package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/gateway"
)

// gatewaySandbox is what the model gateway needs of sandbox id
// (gateway.ProtocolSandbox): its protocol files, read and written in the
// container.
func (p *Provider) gatewaySandbox(id string) gateway.Sandbox {
	return gateway.ProtocolSandbox(id,
		func(name string) ([]byte, error) {
			rc, err := p.CopyFrom(context.Background(), id, protocol.Dir+"/"+name)
			if err != nil {
				return nil, err
			}
			defer rc.Close()
			return io.ReadAll(io.LimitReader(rc, 4<<20))
		},
		func(name string, data []byte) error {
			return p.CopyTo(context.Background(), id, bytes.NewReader(data), protocol.Dir+"/"+name)
		})
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
