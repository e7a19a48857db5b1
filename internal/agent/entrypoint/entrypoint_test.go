package entrypoint

import (
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Config
		wantErr string
	}{
		{name: "the image's command", args: []string{"--", "serve", "--workspace", "/workspace"},
			want: Config{Args: []string{"serve", "--workspace", "/workspace"}}},
		{name: "flags", args: []string{"--user", "1000:1000", "--workdir", "/w", "--", "serve"},
			want: Config{User: "1000:1000", Workdir: "/w", Args: []string{"serve"}}},
		{name: "flags with =", args: []string{"--user=agent", "--", "serve", "--user", "x"},
			want: Config{User: "agent", Args: []string{"serve", "--user", "x"}}},
		{name: "the agent's own --", args: []string{"--", "jail", "--", "true"},
			want: Config{Args: []string{"jail", "--", "true"}}},

		{name: "no --", args: []string{"serve"}, wantErr: "want -- before the agent's arguments"},
		{name: "nothing after --", args: []string{"--user", "agent", "--"}, wantErr: "no agent arguments"},
		{name: "no arguments", args: nil, wantErr: "want --"},
		{name: "unknown flag", args: []string{"--uid", "1", "--", "serve"}, wantErr: "flag provided but not defined: -uid"},
		{name: "relative workdir", args: []string{"--workdir", "ws", "--", "serve"}, wantErr: "want an absolute directory"},
		{name: "the root as workdir", args: []string{"--workdir", "//", "--", "serve"}, wantErr: "want a directory below /"},
		{name: "help", args: []string{"--help"}, wantErr: "usage: " + Usage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %+v, %v; want an error containing %q", tt.args, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			if got.User != tt.want.User || got.Workdir != tt.want.Workdir || !slices.Equal(got.Args, tt.want.Args) {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.args, got, tt.want)
			}
		})
	}
}

func TestSettings(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		env     []string
		want    Config
		wantErr string
	}{
		{name: "defaults", want: Config{Workdir: DefaultWorkdir}},
		{name: "from the environment", env: []string{"AGENT_USER=1000:1000", "AGENT_WORKDIR=/src"},
			want: Config{User: "1000:1000", Workdir: "/src"}},
		{name: "flags win", cfg: Config{User: "agent", Workdir: "/w"}, env: []string{"AGENT_USER=node", "AGENT_WORKDIR=/src"},
			want: Config{User: "agent", Workdir: "/w"}},
		{name: "relative AGENT_WORKDIR", env: []string{"AGENT_WORKDIR=src"}, wantErr: "AGENT_WORKDIR=src: want an absolute directory"},
		{name: "AGENT_WORKDIR the root", env: []string{"AGENT_WORKDIR=/"}, wantErr: "AGENT_WORKDIR=/: want a directory below /"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.settings(tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("settings = %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.User != tt.want.User || got.Workdir != tt.want.Workdir {
				t.Fatalf("settings = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// The agent runs as the same executable, below the same commands as the
// entrypoint: "fleetlift agent entrypoint -- serve" executes "fleetlift
// agent serve".
func TestArgv(t *testing.T) {
	c := Config{Args: []string{"serve", "--workspace", "/workspace"}}
	if got, want := c.argv("fleetlift-agent", nil), []string{"fleetlift-agent", "serve", "--workspace", "/workspace"}; !slices.Equal(got, want) {
		t.Fatalf("argv = %q, want %q", got, want)
	}
	if got, want := c.argv("fleetlift", []string{"agent"}), []string{"fleetlift", "agent", "serve", "--workspace", "/workspace"}; !slices.Equal(got, want) {
		t.Fatalf("argv = %q, want %q", got, want)
	}
}
