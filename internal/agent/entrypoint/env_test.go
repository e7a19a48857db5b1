package entrypoint

import (
	"slices"
	"testing"
)

func TestEnviron(t *testing.T) {
	agent := Account{Name: "agent", UID: 1000, GID: 1000, Home: "/home/agent"}
	anonymous := Account{UID: 1000, GID: 1000, Home: DefaultHome}
	tests := []struct {
		name    string
		env     []string
		account Account
		want    []string
	}{
		{
			name:    "no change but the account's HOME, USER and LOGNAME",
			env:     []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/root"},
			account: agent,
			want:    []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/home/agent", "USER=agent", "LOGNAME=agent"},
		},
		{
			name: "control plane removed",
			env: []string{
				"FLEETLIFT_TEMPORAL_ADDRESS=temporal:7233", "FLEETLIFT_TEMPORAL_API_KEY=k-0123456789",
				"FLEETLIFT_TEMPORAL_TLS_KEY=/secrets/key.pem", "TEMPORAL_ADDRESS=temporal:7233",
				"TEMPORAL_API_KEY=k-0123456789", "FLEETLIFT_STATE_DIR=/var/lib/fleetlift",
				"FLEETLIFT_WEBHOOK_SECRET=s-0123456789", "FLEETLIFT_NAMESPACE=fleetlift-system",
				"DOCKER_HOST=unix:///var/run/docker.sock", "DOCKER_CERT_PATH=/certs", "KUBECONFIG=/root/.kube/config",
				"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443",
				"SESSION_TOKEN=t-0123456789", "CONTROL_PLANE_URL=https://cp.example.com", "SESSION_ID=42",
				"AGENT_USER=agent", "AGENT_WORKDIR=/workspace",
				"PATH=/usr/bin",
			},
			account: agent,
			want:    []string{"PATH=/usr/bin", "HOME=/home/agent", "USER=agent", "LOGNAME=agent"},
		},
		{
			name: "the agent's settings and clone credentials kept, the forge's removed",
			env: []string{
				"FLEETLIFT_FORGE_TOKEN=f-0123456789", "FLEETLIFT_GIT_TOKEN=g-0123456789",
				"FLEETLIFT_FORGE_URL=https://git.example.com", "FLEETLIFT_GIT_TOKEN_ORIGINS=https://git.example.com",
				"FLEETLIFT_ALLOW_FILE_ROOTS=/srv/git", `FLEETLIFT_AGENT_CLI=["claude","-p"]`,
				"FLEETLIFT_AGENT_CLI_ENV=ANTHROPIC_API_KEY,DOCKER_TOKEN", "ANTHROPIC_API_KEY=a-0123456789",
				"DOCKER_TOKEN=d-0123456789",
			},
			account: agent,
			// The forge's token and URL are the worker's alone: it
			// proposes the changes.
			want: []string{
				"FLEETLIFT_GIT_TOKEN=g-0123456789",
				"FLEETLIFT_GIT_TOKEN_ORIGINS=https://git.example.com",
				"FLEETLIFT_ALLOW_FILE_ROOTS=/srv/git", `FLEETLIFT_AGENT_CLI=["claude","-p"]`,
				// DOCKER_TOKEN is the container engine's, named for the
				// agent CLI or not.
				"FLEETLIFT_AGENT_CLI_ENV=ANTHROPIC_API_KEY,DOCKER_TOKEN", "ANTHROPIC_API_KEY=a-0123456789",
				"HOME=/home/agent", "USER=agent", "LOGNAME=agent",
			},
		},
		{
			name:    "look-alikes kept",
			env:     []string{"MY_DOCKER_HOST=x", "XTEMPORAL_ADDRESS=y", "SESSION_TOKENS=z", "FLEETLIFT_TEMPORALX=w"},
			account: agent,
			want:    []string{"MY_DOCKER_HOST=x", "XTEMPORAL_ADDRESS=y", "SESSION_TOKENS=z", "FLEETLIFT_TEMPORALX=w", "HOME=/home/agent", "USER=agent", "LOGNAME=agent"},
		},
		{
			name:    "malformed entries removed",
			env:     []string{"NOEQUALS", "=novalue", "EMPTY=", "LANG=C"},
			account: agent,
			want:    []string{"EMPTY=", "LANG=C", "HOME=/home/agent", "USER=agent", "LOGNAME=agent"},
		},
		{
			name:    "account without a name: no USER or LOGNAME",
			env:     []string{"USER=root", "LOGNAME=root", "HOME=/root"},
			account: anonymous,
			want:    []string{"HOME=/home/agent"},
		},
		{
			name:    "empty environment",
			env:     nil,
			account: agent,
			want:    []string{"HOME=/home/agent", "USER=agent", "LOGNAME=agent"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Environ(tt.env, tt.account)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Environ\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
