package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/jail"
)

// modelGateway sets the agent CLI up to reach the worker's model
// gateway, when the agent has one that serves a model API and its sandbox
// a key to it, and returns the CLI's variables for it: the gateway as the
// base URL of each API it serves (the Messages API, an OpenAI-compatible
// one), the sandbox's key as that API's key (which replaces any other).
// A jailed CLI (jl) reaches it through a port its jail forwards; an
// unjailed one through a port of the agent's loopback relayed to it until
// done is called.
func (r *runner) modelGateway(jl *jail.Jail) (env []string, done func(), _ error) {
	done = func() {}
	sock, apis := r.o.GitGateway, r.o.ModelAPIs
	if iso := r.o.Isolation; iso != nil {
		sock, apis = iso.Gateway, iso.GatewayAPIs
		if jl == nil {
			sock = ""
		}
	}
	if sock == "" || len(apis) == 0 {
		return nil, done, nil
	}
	key, err := r.gatewayKey()
	if key == "" || err != nil {
		return nil, done, err
	}
	var base string
	if jl != nil {
		jl.Spec.Forwards = append(jl.Spec.Forwards, jail.Forward{Port: GatewayPort, Socket: sock})
		base = "http://127.0.0.1:" + strconv.Itoa(GatewayPort)
	} else {
		lr, err := newLoopbackRelay(sock, key)
		if err != nil {
			return nil, done, err
		}
		base, done = lr.base, lr.close
	}
	for _, api := range apis {
		switch api {
		case protocol.GatewayAnthropic:
			env = append(env, "ANTHROPIC_BASE_URL="+base, "ANTHROPIC_API_KEY="+key)
		case protocol.GatewayOpenAI:
			env = append(env, "OPENAI_BASE_URL="+base+protocol.GatewayOpenAIPrefix+"v1", "OPENAI_API_KEY="+key)
		}
	}
	return env, done, nil
}

// gatewayKey is the sandbox's key to the worker's gateway, which its
// provider wrote in the protocol directory; "" when it wrote none.
func (r *runner) gatewayKey() (string, error) {
	data, err := os.ReadFile(filepath.Join(r.pdir, protocol.GatewayKeyFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the sandbox's key to the gateway: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// readModelUsage puts what the model gateway counted for this sandbox
// into the result, and returns why it refused a request, if it did: as
// the gateway says it now (protocol.GatewayUsagePath), or, from a gateway
// that cannot say, as it last saved it beside the protocol files.
func (r *runner) readModelUsage() string {
	u, ok := r.askModelUsage()
	if !ok {
		data, err := os.ReadFile(filepath.Join(r.pdir, protocol.UsageFile))
		if err != nil || json.Unmarshal(data, &u) != nil {
			return ""
		}
	}
	r.resultMu.Lock()
	r.result.ModelUsage = &u
	r.resultMu.Unlock()
	return u.Refused
}

// askModelUsage asks the gateway for this sandbox's usage; false when
// there is no gateway to ask or it did not answer.
func (r *runner) askModelUsage() (protocol.ModelUsage, bool) {
	var u protocol.ModelUsage
	sock := r.o.GitGateway
	if iso := r.o.Isolation; iso != nil && iso.Gateway != "" {
		sock = iso.Gateway
	}
	key, err := r.gatewayKey()
	if sock == "" || key == "" || err != nil {
		return u, false
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "http://gateway"+protocol.GatewayUsagePath, nil)
	if err != nil {
		return u, false
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return u, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&u) != nil {
		return u, false
	}
	return u, true
}
