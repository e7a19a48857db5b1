package main

import (
	"context"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestForgeFlags: the forges the operator allows come from its flags (or
// their variables), each with the variable its token is read from, and a
// flag that cannot name one forge is refused before anything is read.
func TestForgeFlags(t *testing.T) {
	tests := []struct {
		name    string
		flags   forgeFlags
		want    []operatorForge
		wantErr string
	}{
		{name: "none", flags: forgeFlags{tokenEnv: DefaultForgeTokenEnv}},
		{name: "one gitea", flags: forgeFlags{typ: "gitea", url: "https://git.example.com", tokenEnv: DefaultForgeTokenEnv},
			want: []operatorForge{{desired.Forge{Name: "gitea", Type: spec.ForgeGitea, URL: "https://git.example.com"}, DefaultForgeTokenEnv}}},
		{name: "github is github.com unless told", flags: forgeFlags{typ: "github", tokenEnv: "GITHUB_TOKEN"},
			want: []operatorForge{{desired.Forge{Name: "github", Type: spec.ForgeGitHub, URL: "https://api.github.com/"}, "GITHUB_TOKEN"}}},
		{name: "several", flags: forgeFlags{typ: "github", tokenEnv: DefaultForgeTokenEnv, forges: []string{
			"name=corp,type=gitea,url=https://git.corp.example/,token-env=CORP_GITEA_TOKEN",
			"type=github,url=https://github.example.com/api/v3/,name=ghe",
		}}, want: []operatorForge{
			{desired.Forge{Name: "github", Type: spec.ForgeGitHub, URL: "https://api.github.com/"}, DefaultForgeTokenEnv},
			{desired.Forge{Name: "corp", Type: spec.ForgeGitea, URL: "https://git.corp.example/"}, "CORP_GITEA_TOKEN"},
			{desired.Forge{Name: "ghe", Type: spec.ForgeGitHub, URL: "https://github.example.com/api/v3/"}, DefaultForgeTokenEnv},
		}},
		{name: "a url without a type", flags: forgeFlags{url: "https://git.example.com", tokenEnv: DefaultForgeTokenEnv},
			wantErr: "--forge-url (or $FLEETLIFT_FORGE_URL) needs --forge-type (or $FLEETLIFT_FORGE_TYPE)"},
		{name: "gitea without a url", flags: forgeFlags{typ: "gitea", tokenEnv: DefaultForgeTokenEnv},
			wantErr: "--forge-type gitea: a gitea forge needs its url"},
		{name: "the local forge", flags: forgeFlags{typ: "local", tokenEnv: DefaultForgeTokenEnv},
			wantErr: "the local forge is always allowed"},
		{name: "an unknown type", flags: forgeFlags{tokenEnv: DefaultForgeTokenEnv, forges: []string{"type=gitlab,url=https://gitlab.example.com"}},
			wantErr: `unknown forge type "gitlab"`},
		{name: "credentials in the url", flags: forgeFlags{typ: "gitea", url: "https://bot:s3cr3t@git.example.com", tokenEnv: DefaultForgeTokenEnv},
			wantErr: "must not hold credentials: the token goes in $FLEETLIFT_FORGE_TOKEN"},
		{name: "not a url", flags: forgeFlags{typ: "gitea", url: "git.example.com", tokenEnv: DefaultForgeTokenEnv},
			wantErr: `url "git.example.com" must be an http(s) URL`},
		{name: "a bad token variable", flags: forgeFlags{typ: "github", tokenEnv: "A-B"},
			wantErr: `token variable "A-B" is not an environment variable name`},
		{name: "a bad name", flags: forgeFlags{tokenEnv: DefaultForgeTokenEnv, forges: []string{"name=Corp,type=github"}},
			wantErr: `name "Corp" must be 1-63 lower-case letters`},
		{name: "not key=value", flags: forgeFlags{tokenEnv: DefaultForgeTokenEnv, forges: []string{"gitea"}},
			wantErr: `--forge "gitea": "gitea" is not key=value`},
		{name: "an unknown key", flags: forgeFlags{tokenEnv: DefaultForgeTokenEnv, forges: []string{"type=github,token=abc"}},
			wantErr: `unknown key "token": use name, type, url and token-env`},
		{name: "a key twice", flags: forgeFlags{tokenEnv: DefaultForgeTokenEnv, forges: []string{"type=github,type=gitea"}},
			wantErr: "type is given twice"},
		{name: "two of one name", flags: forgeFlags{typ: "github", tokenEnv: DefaultForgeTokenEnv, forges: []string{"type=github,url=https://github.example.com/api/v3/"}},
			wantErr: "two allowed forges are named github"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.flags.allowed()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("the error shows the credentials: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("allowed %+v, want %+v", got, tt.want)
			}
		})
	}
}

type gateFunc func(ctx context.Context, rev *desired.Revision) error

func (f gateFunc) Check(ctx context.Context, rev *desired.Revision) error { return f(ctx, rev) }

// TestForgeGate: the reconciler's forge is chosen when it starts; a later
// revision whose config selects another forge, allowed or not, launches
// nothing until a restart, and one that selects the same may launch. The
// next gate sees every revision, and its refusal stands.
func TestForgeGate(t *testing.T) {
	flags := &forgeFlags{typ: "gitea", url: "https://git.example.com/", tokenEnv: DefaultForgeTokenEnv,
		forges: []string{"name=corp,type=gitea,url=https://git.corp.example/"}}
	using := &forgeSetup{Name: "gitea", Type: "gitea", URL: "https://git.example.com/"}
	var asked int
	var refuse error
	g, err := newForgeGate(flags, using, gateFunc(func(context.Context, *desired.Revision) error { asked++; return refuse }))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, config string // "" means no config
		next         error
		want         string // "" means the revision may launch
	}{
		{"the same forge by name", "forge: {type: gitea, name: gitea}\n", nil, ""},
		{"the same forge by url", "forge: {type: gitea, url: \"https://git.example.com\"}\n", nil, ""},
		{"the next gate refuses", "forge: {type: gitea, name: gitea}\n", errors.New("not reviewed"), "not reviewed"},
		{"another allowed forge", "forge: {type: gitea, name: corp}\n", nil,
			"fleetlift.yaml:2:1: forge: selects forge corp (gitea at https://git.corp.example/), but this reconciler started with forge gitea at https://git.example.com/: restart it to change forges"},
		{"a choice among several", "forge: {type: gitea}\n", nil, "fleetlift.yaml:2:1: forge: several of the operator's forges match: select one with forge.name"},
		{"a forge not allowed", "forge: {type: gitea, url: \"https://attacker.example/\"}\n", nil,
			`fleetlift.yaml:2:22: forge.url: "https://attacker.example/" is not a forge the operator allows`},
		{"the local forge", "forge: {type: local}\n", nil, "fleetlift.yaml:2:1: forge: selects forge local, but this reconciler started with forge gitea"},
		{"no config", "", nil, "the repository has no config: it selects forge local, but this reconciler started with forge gitea"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev := &desired.Revision{}
			if tt.config != "" {
				fsys := fstest.MapFS{"fleetlift.yaml": {Data: []byte("version: 1\n" + tt.config)}}
				if rev.Config, err = (&spec.Loader{Eval: spec.InProcess(1)}).LoadConfig(context.Background(), fsys, "fleetlift.yaml"); err != nil {
					t.Fatal(err)
				}
			}
			refuse, asked = tt.next, 0
			err := g.Check(context.Background(), rev)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want the revision let through", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
			if asked != 1 {
				t.Errorf("the next gate was asked %d times, want once", asked)
			}
		})
	}
}

// The operator's forge account writes through one budget on Temporal:
// GitHub's secondary limits unless the flags say otherwise, none for
// Gitea unless they set one; the budget's id holds no token.
func TestWorkerSharesTheForgeWriteBudget(t *testing.T) {
	const token = "ghp_share-canary-0123"
	for _, tc := range []struct {
		typ                string
		perMinute, perHour int
		want               []workflow.ForgeLimit
	}{
		{"github", -1, -1, []workflow.ForgeLimit{{Count: 80, Per: time.Minute}, {Count: 500, Per: time.Hour}}},
		{"github", 30, 0, []workflow.ForgeLimit{{Count: 30, Per: time.Minute}}},
		{"gitea", -1, -1, nil},
		{"gitea", 0, 200, []workflow.ForgeLimit{{Count: 200, Per: time.Hour}}},
	} {
		fs := &forgeSetup{Name: "corp", Type: tc.typ, URL: "https://git.example.com/api/v3/", TokenEnv: "FLEETLIFT_FORGE_TOKEN", Token: token}
		if err := fs.connect(nil); err != nil {
			t.Fatal(err)
		}
		w := &workerFlags{forge: fs, writesPerMinute: tc.perMinute, writesPerHour: tc.perHour}
		var out strings.Builder
		if err := w.shareBudgets(nil, &out); err != nil {
			t.Fatal(err)
		}
		shared, _ := fs.Budget.SharedBudget().(*dispatch.ForgeBudget)
		if tc.want == nil {
			if shared != nil || out.Len() > 0 {
				t.Errorf("%s %d/%d: shared %+v (%q); want none", tc.typ, tc.perMinute, tc.perHour, shared, out.String())
			}
			continue
		}
		if shared == nil {
			t.Fatalf("%s %d/%d: no shared budget", tc.typ, tc.perMinute, tc.perHour)
		}
		if !slices.Equal(shared.Input.Limits, tc.want) || !strings.HasPrefix(shared.ID, "fleetlift/forge-budget/git.example.com/") || strings.Contains(shared.ID+out.String(), token) {
			t.Errorf("%s %d/%d: budget %s with %+v; want %+v, named after the host, without the token", tc.typ, tc.perMinute, tc.perHour, shared.ID, shared.Input.Limits, tc.want)
		}
		if !strings.Contains(out.String(), "forge writes: corp shares one budget") {
			t.Errorf("the worker does not say it shares the budget: %q", out.String())
		}
	}
}

// --forge-requests-per-hour puts every request of the account, reads
// too, through a budget of its own on Temporal, and
// --forge-parallel-clones bounds the git transfers with the forge
// through shared slots; neither id holds the token, and negative values
// are refused as usage errors.
func TestWorkerSharesRequestsAndTransfers(t *testing.T) {
	const token = "ghp_share-canary-4567"
	fs := &forgeSetup{Name: "corp", Type: "gitea", URL: "https://git.example.com/", TokenEnv: "FLEETLIFT_FORGE_TOKEN", Token: token}
	if err := fs.connect(nil); err != nil {
		t.Fatal(err)
	}
	w := &workerFlags{forge: fs, writesPerMinute: -1, writesPerHour: -1, requestsPerHour: 4000, parallelClones: 5}
	var out strings.Builder
	if err := w.shareBudgets(nil, &out); err != nil {
		t.Fatal(err)
	}
	slots, _ := fs.slots().slots.(*dispatch.ForgeSlots)
	if slots == nil || slots.Input.Slots != 5 || !strings.HasPrefix(slots.ID, "fleetlift/forge-slots/git.example.com/") || strings.Contains(slots.ID+out.String(), token) {
		t.Errorf("transfer slots %+v; want 5, named after the host, without the token", slots)
	}
	if !strings.Contains(out.String(), "forge transfers: corp shares 5 transfer slots") {
		t.Errorf("the worker does not say it shares transfer slots: %q", out.String())
	}
	// Gitea has no write limits of its own: the requests' budget alone.
	requests, _ := fs.Budget.SharedRequestsBudget().(*dispatch.ForgeBudget)
	if fs.Budget.SharedBudget() != nil || requests == nil || requests.Join ||
		!slices.Equal(requests.Input.Limits, []workflow.ForgeLimit{{Count: 4000, Per: time.Hour}}) ||
		!strings.HasPrefix(requests.ID, "fleetlift/forge-requests/git.example.com/") || strings.Contains(requests.ID, token) {
		t.Errorf("writes %+v, requests %+v; want no write budget and 4,000 requests an hour, named after the host", fs.Budget.SharedBudget(), requests)
	}
	// The reconciler in the same process joins the write budget, and
	// keeps the worker's budget of requests, which starts it.
	if _, _, ok := fs.shareWrites(nil, -1, -1, 0, true, nil); !ok || fs.Budget.SharedRequestsBudget() != requests {
		t.Errorf("after the reconciler joined: writes joined %v, requests %+v; want the worker's budget of requests kept", ok, fs.Budget.SharedRequestsBudget())
	}
	for _, bad := range []*workerFlags{{forge: fs, requestsPerHour: -1}, {forge: fs, parallelClones: -2}} {
		err := bad.shareBudgets(nil, io.Discard)
		if exitCode(err, nil) != exitUsage {
			t.Errorf("requests %d, clones %d: %v; want a usage error", bad.requestsPerHour, bad.parallelClones, err)
		}
	}
}
