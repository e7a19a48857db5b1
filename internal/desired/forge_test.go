package desired_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// TestSelectForge: a campaigns repository's config selects among the
// forges the operator allows, and a selection that matches none of them
// is an error naming the file, the line and the field, never a forge
// fleetlift would talk to.
func TestSelectForge(t *testing.T) {
	gitea := desired.Forge{Name: "gitea", Type: spec.ForgeGitea, URL: "https://git.example.com/"}
	corp := desired.Forge{Name: "corp", Type: spec.ForgeGitea, URL: "https://git.corp.example/"}
	github := desired.Forge{Name: "github", Type: spec.ForgeGitHub, URL: "https://api.github.com/"}
	const head = "version: 1\nkind: Config\n"
	tests := []struct {
		name    string
		config  string // "" means no config at all
		allowed []desired.Forge
		want    desired.Forge
		wantErr string
	}{
		{name: "no config", allowed: []desired.Forge{gitea}, want: desired.LocalForge},
		{name: "no forge section", config: head, allowed: []desired.Forge{gitea}, want: desired.LocalForge},
		{name: "the local forge", config: head + "forge: {type: local}\n", allowed: []desired.Forge{gitea}, want: desired.LocalForge},
		{name: "selects the allowed forge of its type", config: head + "forge: {type: gitea}\n",
			allowed: []desired.Forge{github, gitea}, want: gitea},
		{name: "selects the allowed forge at its url", config: head + "forge:\n  type: gitea\n  url: https://Git.Example.COM:443\n",
			allowed: []desired.Forge{corp, gitea}, want: gitea},
		{name: "selects by name", config: head + "forge: {type: gitea, name: corp}\n",
			allowed: []desired.Forge{gitea, corp}, want: corp},
		{name: "name and url agree", config: head + "forge: {type: gitea, name: corp, url: \"https://git.corp.example\"}\n",
			allowed: []desired.Forge{gitea, corp}, want: corp},
		{name: "names an unknown url", config: head + "forge:\n  type: gitea\n  url: https://attacker.example/\n",
			allowed: []desired.Forge{gitea},
			wantErr: `fleetlift.yaml:5:3: forge.url: "https://attacker.example/" is not a forge the operator allows: fleetlift talks only to the forges its operator configured (allowed: gitea at https://git.example.com/)`},
		{name: "names an allowed host with another scheme", config: head + "forge:\n  type: gitea\n  url: http://git.example.com/\n",
			allowed: []desired.Forge{gitea}, wantErr: `fleetlift.yaml:5:3: forge.url: "http://git.example.com/" is not a forge the operator allows`},
		{name: "names an allowed host with another path", config: head + "forge:\n  type: gitea\n  url: https://git.example.com/evil/\n",
			allowed: []desired.Forge{gitea}, wantErr: `forge.url: "https://git.example.com/evil/" is not a forge the operator allows`},
		{name: "names token_env", config: head + "forge:\n  type: gitea\n  url: https://attacker.example/\n  token_env: AWS_SECRET_ACCESS_KEY\n",
			allowed: []desired.Forge{gitea}, wantErr: "fleetlift.yaml:6:3: forge.token_env: the repository cannot choose the forge token's variable"},
		{name: "type mismatch", config: head + "forge: {type: github, name: corp}\n",
			allowed: []desired.Forge{corp, github}, wantErr: "fleetlift.yaml:3:9: forge.type: the operator's forge corp is a gitea forge, not github (allowed: corp (gitea at https://git.corp.example/), github at https://api.github.com/)"},
		{name: "type not allowed", config: head + "forge:\n  type: github\n",
			allowed: []desired.Forge{gitea}, wantErr: "fleetlift.yaml:4:3: forge.type: the operator allows no github forge (allowed: gitea at https://git.example.com/)"},
		{name: "no forge allowed", config: head + "forge:\n  type: github\n",
			wantErr: "forge.type: the operator allows no github forge (the operator allows none: fleetlift --forge-type and --forge-url, or --forge, allow one)"},
		{name: "names an unknown forge", config: head + "forge:\n  type: gitea\n  name: elsewhere\n",
			allowed: []desired.Forge{gitea}, wantErr: `fleetlift.yaml:5:3: forge.name: the operator allows no forge named "elsewhere"`},
		{name: "name and url disagree", config: head + "forge: {type: gitea, name: corp, url: \"https://attacker.example/\"}\n",
			allowed: []desired.Forge{gitea, corp}, wantErr: `forge.url: "https://attacker.example/" is not where the operator's forge corp is`},
		{name: "several of the type", config: head + "forge:\n  type: gitea\n",
			allowed: []desired.Forge{gitea, corp}, wantErr: "fleetlift.yaml:3:1: forge: several of the operator's forges match: select one with forge.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg *spec.Config
			var err error
			if tt.config != "" {
				fsys := fstest.MapFS{"fleetlift.yaml": {Data: []byte(tt.config)}}
				cfg, err = (&spec.Loader{Eval: spec.InProcess(1)}).LoadConfig(context.Background(), fsys, "fleetlift.yaml")
			}
			var got desired.Forge
			if err == nil {
				got, err = desired.SelectForge(cfg, tt.allowed)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("selected %v, want %v", got, tt.want)
			}
		})
	}
}
