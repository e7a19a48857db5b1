package spec_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/fleetlift/fleetlift/internal/spec"
)

const agenticTask = `version: 1
id: t
title: T
repositories:
  - url: https://github.com/acme/svc.git
execution:
  agentic:
    prompt: migrate
`

func load(t *testing.T, files map[string]string) *spec.Result {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	res, err := (&spec.Loader{Eval: spec.InProcess(2)}).Load(context.Background(), fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func loadOne(t *testing.T, name, data string) spec.Definition {
	t.Helper()
	res := load(t, map[string]string{name: data})
	if len(res.Errors) > 0 || len(res.Definitions) != 1 {
		t.Fatalf("load %s: %d definitions, errors:\n%v", name, len(res.Definitions), res.Errors)
	}
	return res.Definitions[0]
}

func TestDefaults(t *testing.T) {
	task := loadOne(t, "t.yaml", agenticTask).Task
	checks := []struct {
		name      string
		got, want any
	}{
		{"kind", task.Kind, spec.KindTask},
		{"mode", task.Mode, spec.ModeTransform},
		{"require_approval for agentic", task.RequireApproval, true},
		{"max_parallel", task.MaxParallel, 5},
		{"timeout", task.Timeout.String(), "30m0s"},
		{"branch: the repository's default", task.Repositories[0].Branch, ""},
		{"name from URL", task.Repositories[0].Name, "svc"},
		{"max_iterations", task.Execution.Agentic.Limits.MaxIterations, 10},
		{"max_tokens", task.Execution.Agentic.Limits.MaxTokens, 100000},
		{"max_verifier_retries", task.Execution.Agentic.Limits.MaxVerifierRetries, 3},
		{"max_steering_iterations", task.Execution.Agentic.Limits.MaxSteeringIterations, 5},
		{"agent", task.Execution.Agentic.Agent, "claude-code"},
		{"failure threshold", task.Failure.ThresholdPercent, 100},
		{"failure action", task.Failure.Action, spec.FailurePause},
		{"submodules off", task.Repositories[0].Submodules, false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}

	det := loadOne(t, "d.yaml", strings.Replace(agenticTask, "agentic:\n    prompt: migrate", "deterministic:\n    image: golang:1.26\n    command: [go, mod, tidy]", 1)).Task
	if det.RequireApproval {
		t.Error("deterministic task: require_approval defaults to false")
	}

	report := loadOne(t, "r.yaml", agenticTask+"mode: report\n").Task
	if out := report.Execution.Agentic.Output; out == nil || out.Capture != spec.CaptureFile {
		t.Errorf("report: output defaults to capture: file, got %+v", out)
	}

	camp := loadOne(t, "c.yaml", `version: 1
kind: Campaign
id: c
title: C
template:
  execution:
    deterministic: {image: golang, command: [go, mod, tidy]}
repositories:
  - url: git@github.com:acme/api.git
`).Campaign
	cchecks := []struct {
		name      string
		got, want any
	}{
		{"batch_size", camp.BatchSize, 10},
		{"max_parallel", camp.MaxParallel, 5},
		{"failure threshold", camp.Failure.ThresholdPercent, 20},
		{"failure action", camp.Failure.Action, spec.FailurePause},
		{"no rate limit of its own: the forge's budget paces", camp.RateLimit == nil, true},
		{"sliding window", camp.StrictBatches, false},
		{"update strategy", camp.SyncPolicy.Update, spec.UpdateInPlace},
		{"prune", camp.SyncPolicy.Prune, false},
		{"suspend", camp.Suspend, false},
		{"scp-like name", camp.Repositories[0].Name, "api"},
		{"template mode", camp.Template.Mode, spec.ModeTransform},
	}
	for _, c := range cchecks {
		if c.got != c.want {
			t.Errorf("campaign %s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if rl := loadOne(t, "b.yaml", strings.Replace(campaignYAML, "repositories:", "rate_limit: {burst: 5}\nrepositories:", 1)).Campaign.RateLimit; rl == nil || *rl != (spec.RateLimit{PullRequestsPerHour: 60, Burst: 5}) {
		t.Errorf("rate_limit with a burst alone: %+v, want 60 an hour, burst 5", rl)
	}
}

const campaignYAML = `version: 1
kind: Campaign
id: c
title: C
template:
  execution:
    deterministic: {image: golang, command: [go, mod, tidy]}
repositories:
  - url: git@github.com:acme/api.git
    branch: trunk
`

// TestPreviousDigestsKeepRunsUnchanged: a campaign without rate_limit had
// the schema's old default, 60 pull requests an hour with a burst of 10,
// in the digest its runs recorded: PreviousDigests gives that digest, the
// one the same file with the old default written out has, so the plan
// does not count the campaign changed after an upgrade. A campaign that
// sets what no earlier release read has none.
func TestPreviousDigestsKeepRunsUnchanged(t *testing.T) {
	now := loadOne(t, "c.yaml", campaignYAML)
	then := loadOne(t, "c.yaml", strings.Replace(campaignYAML, "repositories:", "rate_limit: {pull_requests_per_hour: 60, burst: 10}\nrepositories:", 1))
	if now.Digest == then.Digest {
		t.Fatal("a campaign without rate_limit has the digest of one with 60 an hour: they no longer mean the same")
	}
	if got := now.PreviousDigests(); len(got) != 1 || got[0] != then.Digest {
		t.Errorf("previous digests %v, want [%s]", got, then.Digest)
	}
	for name, extra := range map[string]string{
		"its own rate limit": "rate_limit: {pull_requests_per_hour: 600}\n",
		"strict batches":     "strict_batches: true\n",
	} {
		d := loadOne(t, "c.yaml", strings.Replace(campaignYAML, "repositories:", extra+"repositories:", 1))
		if got := d.PreviousDigests(); got != nil {
			t.Errorf("%s: previous digests %v, want none", name, got)
		}
	}
}

// TestPreviousDigestsOfReports: an agent's report without
// require_approval waited for approval under earlier releases; the digest
// of the same file with require_approval: true written out is among its
// previous digests (with the old rate limit too, for a campaign), so its
// recorded run is not counted changed. A deterministic report, or one that
// waits for approval, has no such digest.
func TestPreviousDigestsOfReports(t *testing.T) {
	const report = `version: 1
kind: Campaign
id: audit
title: Audit
template:
  mode: report
  execution:
    agentic: {prompt: "Audit the module."}
rate_limit: {pull_requests_per_hour: 600}
repositories:
  - url: git@github.com:acme/api.git
    branch: trunk
`
	now := loadOne(t, "audit.yaml", report)
	then := loadOne(t, "audit.yaml", strings.Replace(report, "  execution:", "  require_approval: true\n  execution:", 1))
	if got := now.PreviousDigests(); len(got) != 1 || got[0] != then.Digest {
		t.Errorf("report: previous digests %v, want [%s]", got, then.Digest)
	}
	noRate := strings.Replace(report, "rate_limit: {pull_requests_per_hour: 600}\n", "", 1)
	both := loadOne(t, "audit.yaml", strings.Replace(strings.Replace(noRate, "  execution:", "  require_approval: true\n  execution:", 1),
		"repositories:", "rate_limit: {pull_requests_per_hour: 60, burst: 10}\nrepositories:", 1))
	if got := loadOne(t, "audit.yaml", noRate).PreviousDigests(); !slices.Contains(got, both.Digest) || len(got) != 3 {
		t.Errorf("report without rate_limit: previous digests %v, want 3 with %s (both old defaults)", got, both.Digest)
	}
	for name, from := range map[string][2]string{
		"deterministic report": {"agentic: {prompt: \"Audit the module.\"}", "deterministic: {image: golang, command: [\"true\"]}"},
		"waits for approval":   {"  execution:", "  require_approval: true\n  execution:"},
	} {
		if got := loadOne(t, "audit.yaml", strings.Replace(report, from[0], from[1], 1)).PreviousDigests(); got != nil {
			t.Errorf("%s: previous digests %v, want none", name, got)
		}
	}
}

// TestPreviousDigestsOfDefaultBranches: a repository without branch was
// cloned at main by earlier releases; the digest of the same file with
// branch: main written out for every such repository (the campaign's,
// its groups', its transformation's) is among its previous digests, alone
// and with the other old defaults, so that upgrading does not run the
// campaign again. A definition whose repositories all name a branch has
// none from it.
func TestPreviousDigestsOfDefaultBranches(t *testing.T) {
	const campaign = `version: 1
kind: Campaign
id: c
title: C
template:
  transformation: {url: "https://github.com/acme/recipes.git"}
  execution:
    deterministic: {image: golang, command: [go, mod, tidy]}
rate_limit: {pull_requests_per_hour: 600}
groups:
  - name: g
    repositories:
      - url: git@github.com:acme/lib.git
      - url: git@github.com:acme/web.git
        branch: develop
`
	main := strings.NewReplacer(
		`recipes.git"}`, `recipes.git", branch: main}`,
		"lib.git\n", "lib.git\n        branch: main\n").Replace(campaign)
	now, then := loadOne(t, "c.yaml", campaign), loadOne(t, "c.yaml", main)
	if now.Campaign.Groups[0].Repositories[0].Branch != "" || then.Campaign.Groups[0].Repositories[0].Branch != "main" || then.Campaign.Template.Transformation.Branch != "main" {
		t.Fatalf("branches: %+v then %+v", now.Campaign.Groups, then.Campaign.Groups)
	}
	if got := now.PreviousDigests(); len(got) != 1 || got[0] != then.Digest {
		t.Errorf("previous digests %v, want [%s], the digest with branch: main written out", got, then.Digest)
	}
	if got := then.PreviousDigests(); got != nil {
		t.Errorf("every repository names its branch: previous digests %v, want none", got)
	}
	// campaignYAML names its branch; plain does not.
	plain := strings.Replace(campaignYAML, "    branch: trunk\n", "", 1)
	both := loadOne(t, "c.yaml", strings.Replace(plain, "api.git\n", "api.git\n    branch: main\nrate_limit: {pull_requests_per_hour: 60, burst: 10}\n", 1))
	if got := loadOne(t, "c.yaml", plain).PreviousDigests(); len(got) != 3 || !slices.Contains(got, both.Digest) {
		t.Errorf("without rate_limit: previous digests %v, want 3 (the old rate limit, main, both: %s)", got, both.Digest)
	}

	const task = `version: 1
kind: Task
id: t
title: T
execution:
  deterministic: {image: golang, command: [go, mod, tidy]}
transformation:
  url: git@github.com:acme/recipes.git
targets:
  - url: git@github.com:acme/web.git
`
	tnow := loadOne(t, "t.yaml", task)
	tthen := loadOne(t, "t.yaml", strings.NewReplacer("recipes.git\n", "recipes.git\n  branch: main\n", "web.git\n", "web.git\n    branch: main\n").Replace(task))
	if got := tnow.PreviousDigests(); len(got) != 1 || got[0] != tthen.Digest {
		t.Errorf("task: previous digests %v, want [%s]", got, tthen.Digest)
	}
}

func TestConfigDefaults(t *testing.T) {
	fsys := fstest.MapFS{"fleetlift.yaml": {Data: []byte("version: 1\n")}}
	cfg, err := (&spec.Loader{Eval: spec.InProcess(1)}).LoadConfig(context.Background(), fsys, "fleetlift.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Watch.Branch != "main" || cfg.Watch.Path != "campaigns" || cfg.Forge.Type != spec.ForgeLocal || cfg.Status.Branch != "fleetlift/status" {
		t.Errorf("config defaults: %+v", cfg)
	}
}

// TestConfigReviewedMergeDefault: watch.require_reviewed_merge, unset, is
// on with a forge that has reviewed pull requests and off with local;
// set, it is what it says, and local refuses it on.
func TestConfigReviewedMergeDefault(t *testing.T) {
	for _, tc := range []struct {
		name, file, body string
		want             bool
		wantErr          string
	}{
		{"local forge", "fleetlift.yaml", "version: 1\n", false, ""},
		{"github, unset", "fleetlift.yaml", "version: 1\nforge: {type: github}\n", true, ""},
		{"gitea, unset", "fleetlift.yaml", "version: 1\nforge: {type: gitea}\n", true, ""},
		{"gitea, off", "fleetlift.yaml", "version: 1\nwatch: {require_reviewed_merge: false}\nforge: {type: gitea}\n", false, ""},
		{"gitea, unset, in CUE", "fleetlift.cue", "version: 1\nforge: type: \"gitea\"\n", true, ""},
		{"local, on", "fleetlift.yaml", "version: 1\nwatch: {require_reviewed_merge: true}\n", false, "needs a forge with reviewed pull requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{tc.file: {Data: []byte(tc.body)}}
			cfg, err := (&spec.Loader{Eval: spec.InProcess(1)}).LoadConfig(context.Background(), fsys, tc.file)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadConfig: %v; want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Watch.RequireReviewedMerge != tc.want {
				t.Errorf("require_reviewed_merge = %v, want %v", cfg.Watch.RequireReviewedMerge, tc.want)
			}
		})
	}
}

// TestConfigForge: a config's forge section only selects among the
// operator's forges: it may name one, or give a type and a URL, but the
// schema refuses a token variable; the fields checked after loading are
// located in the file.
func TestConfigForge(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		body    string
		want    spec.Forge
		wantErr string
	}{
		{"no forge section", "fleetlift.yaml", "version: 1\n", spec.Forge{Type: spec.ForgeLocal}, ""},
		{"type alone", "fleetlift.yaml", "version: 1\nforge: {type: gitea}\n", spec.Forge{Type: spec.ForgeGitea}, ""},
		{"type and url", "fleetlift.yaml", "version: 1\nforge:\n  type: gitea\n  url: https://git.example.com/\n",
			spec.Forge{Type: spec.ForgeGitea, URL: "https://git.example.com/"}, ""},
		{"name", "fleetlift.yaml", "version: 1\nforge: {type: github, name: corp}\n", spec.Forge{Type: spec.ForgeGitHub, Name: "corp"}, ""},
		{"token_env refused", "fleetlift.yaml", "version: 1\nforge:\n  type: gitea\n  url: https://git.example.com/\n  token_env: AWS_SECRET_ACCESS_KEY\n",
			spec.Forge{}, "fleetlift.yaml:5:3: forge.token_env: the repository cannot choose the forge token's variable"},
		{"token_env refused in CUE", "fleetlift.cue", "version: 1\nforge: {\n\ttype: \"gitea\"\n\ttoken_env: \"HOME\"\n}\n",
			spec.Forge{}, "fleetlift.cue:4:2: forge.token_env: the repository cannot choose"},
		{"name of a local forge", "fleetlift.yaml", "version: 1\nforge: {name: corp}\n", spec.Forge{}, "forge.name: names one of the operator's forges: set forge.type to github or gitea"},
		{"url of a local forge", "fleetlift.yaml", "version: 1\nforge: {url: https://attacker.example/}\n", spec.Forge{}, "forge.url: a local forge has no url"},
		{"bad name", "fleetlift.yaml", "version: 1\nforge: {type: gitea, name: Corp_Gitea}\n", spec.Forge{}, `forge.name: "Corp_Gitea" must be 1-63 lower-case`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{tt.file: {Data: []byte(tt.body)}}
			cfg, err := (&spec.Loader{Eval: spec.InProcess(1)}).LoadConfig(context.Background(), fsys, tt.file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Forge != tt.want {
				t.Errorf("forge %+v, want %+v", cfg.Forge, tt.want)
			}
		})
	}
}

// TestConfigFieldError: a problem found after loading (the operator does
// not allow the forge a config selects) names the file, the line and
// column of the field, and the field, in YAML as in CUE, and whether the
// file was evaluated in this process or in a worker.
func TestConfigFieldError(t *testing.T) {
	evaluators := map[string]spec.Evaluator{"in process": spec.InProcess(1), "worker": newPool(t)}
	tests := []struct {
		name, file, body, field, want string
	}{
		{"yaml url", "fleetlift.yaml", "version: 1\nkind: Config\nforge:\n  type: gitea\n  url: https://attacker.example/\n",
			"forge.url", "fleetlift.yaml:5:3: forge.url: not allowed"},
		{"yaml flow url", "fleetlift.yml", "version: 1\nforge: {type: gitea, url: \"https://git.example.com/\"}\n",
			"forge.url", "fleetlift.yml:2:22: forge.url: not allowed"},
		{"cue type", "fleetlift.cue", "version: 1\nforge: type: \"github\"\n",
			"forge.type", "fleetlift.cue:2:8: forge.type: not allowed"},
		{"the forge section", "fleetlift.yaml", "version: 1\nforge:\n  type: github\n",
			"forge", "fleetlift.yaml:2:1: forge: not allowed"},
		{"no forge section", "fleetlift.yaml", "version: 1\n", "forge", "fleetlift.yaml: forge: not allowed"},
	}
	for _, tt := range tests {
		for ename, eval := range evaluators {
			t.Run(tt.name+"/"+ename, func(t *testing.T) {
				fsys := fstest.MapFS{tt.file: {Data: []byte(tt.body)}}
				cfg, err := (&spec.Loader{Eval: eval}).LoadConfig(context.Background(), fsys, tt.file)
				if err != nil {
					t.Fatal(err)
				}
				if got := cfg.FieldError(tt.field, "not allowed").Error(); got != tt.want {
					t.Errorf("got %q, want %q", got, tt.want)
				}
			})
		}
	}
}

// TestConstraints changes one thing in a valid task and expects the error
// to name the field and say what is wrong; "valid" cases must load.
func TestConstraints(t *testing.T) {
	tests := []struct {
		name    string
		from    string // replaced in agenticTask; empty appends to
		to      string
		wantErr string // "" means valid
	}{
		{"valid", "", "", ""},
		{"id upper case", "id: t", "id: Tee", `id: "Tee" must be 1-63 lower-case`},
		{"id too long", "id: t", "id: " + strings.Repeat("a", 64), "id: "},
		{"empty title", "title: T", `title: ""`, "title: "},
		{"mode enum", "", "mode: refactor", `mode: "refactor" must be one of "report", "transform"`},
		{"wrong type", "", "max_parallel: five", `max_parallel: "five" must be`},
		{"max_parallel zero", "", "max_parallel: 0", "max_parallel: 0 must be >=1"},
		{"unknown field", "", "repositorys: []", "repositorys: unknown field"},
		{"nested unknown field", "prompt: migrate", "prompt: migrate\n    promt: x", "execution.agentic.promt: unknown field"},
		{"name traversal", "- url: https://github.com/acme/svc.git", "- url: https://github.com/acme/svc.git\n    name: ../../x", `repositories[0].name: "../../x" must be letters`},
		{"name option", "- url: https://github.com/acme/svc.git", "- url: https://github.com/acme/svc.git\n    name: -x", `repositories[0].name: "-x" must be`},
		{"branch ..", "- url: https://github.com/acme/svc.git", "- url: https://github.com/acme/svc.git\n    branch: a..b", `repositories[0].branch: "a..b" must be a valid git branch name`},
		{"branch ok with slash", "- url: https://github.com/acme/svc.git", "- url: https://github.com/acme/svc.git\n    branch: release/v1", ""},
		{"ext transport", "https://github.com/acme/svc.git", "ext::sh -c touch% /tmp/pwned", "repositories[0].url: "},
		{"plain http", "https://github.com/acme/svc.git", "http://github.com/acme/svc.git", "repositories[0].url: "},
		{"credentials in URL", "https://github.com/acme/svc.git", "https://user:tok@github.com/acme/svc.git", "repositories[0].url: "},
		{"ssh URL", "https://github.com/acme/svc.git", "ssh://git@github.com/acme/svc.git", ""},
		{"file URL", "https://github.com/acme/svc.git", "file:///srv/git/svc.git", ""},
		{"scp-like starting with -", "https://github.com/acme/svc.git", "-oProxyCommand=x@host:repo", "repositories[0].url: "},
		{"both executions", "prompt: migrate", "prompt: migrate\n  deterministic: {image: x, command: [x]}", "execution: set only one of execution.agentic or execution.deterministic"},
		{"no execution", "execution:\n  agentic:\n    prompt: migrate\n", "execution: {}\n", "execution: set one of"},
		{"for_each in transform", "", "for_each: [{name: a, context: b}]", "for_each: for_each is only allowed with mode: report"},
		{"pull_request in report", "", "mode: report\npull_request: {branch_prefix: auto/x, title: t}", "pull_request: pull_request is only allowed with mode: transform"},
		{"branch_prefix option", "", "pull_request: {branch_prefix: --force, title: t}", `pull_request.branch_prefix: "--force" must be a valid git branch name`},
		{"threshold over 100", "", "failure: {threshold_percent: 150}", "failure.threshold_percent: 150 must be <=100"},
		{"failure action enum", "", "failure: {threshold_percent: 10, action: retry}", `failure.action: "retry" must be one of "abort", "pause"`},
		{"timeout words", "", `timeout: "30 minutes"`, `timeout: "30 minutes" must be a duration`},
		{"memory quantity", "", "sandbox: {resources: {limits: {memory: lots}}}", `sandbox.resources.limits.memory: "lots" must be a resource quantity`},
		{"env name", "agentic:\n    prompt: migrate", "deterministic:\n    image: x\n    command: [x]\n    env: {\"1BAD\": x}", `execution.deterministic.env."1BAD": unknown field`},
		{"duplicate derived names", "- url: https://github.com/acme/svc.git", "- url: https://github.com/acme/svc.git\n  - url: https://github.com/other/svc.git", `repositories: names must be unique: "svc" is used more than once`},
		{"targets without transformation", "repositories:\n  - url: https://github.com/acme/svc.git", "targets:\n  - url: https://github.com/acme/svc.git", "targets: targets need a transformation repository"},
		{"transformation and targets", "repositories:\n  - url: https://github.com/acme/svc.git", "transformation: {url: https://github.com/acme/recipes.git}\ntargets:\n  - url: https://github.com/acme/svc.git", ""},
		{"repositories and targets", "", "transformation: {url: https://github.com/acme/recipes.git}\ntargets:\n  - url: https://github.com/acme/other.git", "targets: set repositories or transformation with targets, not both"},
		{"no repositories", "repositories:\n  - url: https://github.com/acme/svc.git\n", "", "repositories: set one of repositories, repositories_from, groups, or transformation with targets"},
		{"groups and repositories", "", "groups: [{name: a, repositories: [{url: https://github.com/acme/b.git}]}]", "groups: set groups or repositories/targets, not both"},
		{"group name slash", "repositories:\n  - url: https://github.com/acme/svc.git", "groups: [{name: a/b, repositories: [{url: https://github.com/acme/b.git}]}]", `groups[0].name: "a/b" must be`},
		{"verifier command string", "prompt: migrate", "prompt: migrate\n    verifiers: [{name: build, command: go build}]", "execution.agentic.verifiers[0].command: "},
		{"max_iterations negative", "prompt: migrate", "prompt: migrate\n    limits: {max_iterations: -1}", "execution.agentic.limits.max_iterations: -1 must be >=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := agenticTask
			switch {
			case tt.from != "":
				if !strings.Contains(src, tt.from) {
					t.Fatalf("fixture has no %q", tt.from)
				}
				src = strings.Replace(src, tt.from, tt.to, 1)
			case tt.to != "":
				src += tt.to + "\n"
			}
			res := load(t, map[string]string{"t.yaml": src})
			if tt.wantErr == "" {
				if len(res.Errors) > 0 {
					t.Fatalf("want valid, got:\n%v", res.Errors)
				}
				return
			}
			if len(res.Definitions) != 0 {
				t.Errorf("invalid definition was loaded: %+v", res.Definitions[0])
			}
			got := res.Errors.Error()
			if !strings.Contains(got, tt.wantErr) {
				t.Errorf("want an error containing %q, got:\n%s", tt.wantErr, got)
			}
			for _, e := range res.Errors {
				if e.File != "t.yaml" || e.Line == 0 {
					t.Errorf("error without file and line: %+v", e)
				}
			}
			if strings.Contains(got, "tok@") {
				t.Errorf("a credential reached the error text: %s", got)
			}
		})
	}
}

func TestAllErrorsOfAllFilesAndValidOnesKept(t *testing.T) {
	res := load(t, map[string]string{
		"good.yaml":   agenticTask,
		"bad1.yaml":   strings.Replace(agenticTask, "id: t", "id: b1", 1) + "mode: refactor\nbogus: 1\n",
		"sub/bad.cue": "version: 1\nid: \"b2\"\ntitle: 3\n",
	})
	if len(res.Definitions) != 1 || res.Definitions[0].ID != "t" {
		t.Fatalf("the valid definition must still load: %+v", res.Definitions)
	}
	got := res.Errors.Error()
	for _, want := range []string{"bad1.yaml:9:7: mode:", "bad1.yaml:10:1: bogus: unknown field", "sub/bad.cue:3:8: title:"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// A CUE file is checked against the schema's definition of its kind
// whatever it declares itself: its own #Task, open and without rules,
// changes nothing of what it is held to.
func TestAFileOfItsOwnDefinitionsIsHeldToTheSchemas(t *testing.T) {
	res := load(t, map[string]string{"t.cue": `#Task: {...}
#Campaign: {...}
version: 1
id: "t"
title: "T"
bogus: 1
mode: "refactor"
repositories: [{url: "https://github.com/acme/svc.git"}]
execution: agentic: prompt: "migrate"
`})
	got := res.Errors.Error()
	for _, want := range []string{"t.cue:6:1: bogus: unknown field", `t.cue:7:7: mode: "refactor" must be one of`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// Each name a list repeats is an error of its own, at the item that
// repeats it; a name repeated twice over is one error.
func TestEveryRepeatedNameIsReportedWhereItRepeats(t *testing.T) {
	src := strings.Replace(agenticTask, "  - url: https://github.com/acme/svc.git\n",
		"  - url: https://github.com/acme/svc.git\n"+ // line 5
			"  - url: https://github.com/acme/api.git\n"+
			"  - url: https://github.com/other/svc.git\n"+ // line 7
			"  - url: https://github.com/other/api.git\n"+ // line 8
			"  - url: https://github.com/third/svc.git\n", 1)
	res := load(t, map[string]string{"t.yaml": src})
	var got []string
	for _, e := range res.Errors {
		got = append(got, fmt.Sprintf("%d %s", e.Line, e.Msg))
	}
	api := `8 names must be unique: "api" is used more than once (set name to tell them apart)`
	svc := `names must be unique: "svc" is used more than once (set name to tell them apart)`
	if len(got) != 2 || got[0] != api && got[1] != api || !strings.Contains(got[0]+got[1], svc) {
		t.Errorf("errors %q; want one for api at line 8 and one for svc", got)
	}
}

func TestDuplicateIDsNameBothFiles(t *testing.T) {
	res := load(t, map[string]string{"a.yaml": agenticTask, "b/c.yaml": agenticTask})
	if len(res.Definitions) != 0 {
		t.Errorf("neither duplicate may load, got %d", len(res.Definitions))
	}
	got := res.Errors.Error()
	for _, want := range []string{`a.yaml:2:1: id: duplicate id "t": also defined in b/c.yaml`, `b/c.yaml:2:1: id: duplicate id "t": also defined in a.yaml`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

func TestDigest(t *testing.T) {
	yamlSrc := `# comment
version: 1
kind: Campaign
id: c
title: C
template:
  execution:
    agentic:
      prompt: go
      output: {schema: {type: object, required: [a], properties: {a: {type: string}}}}
  mode: report
repositories:
  - url: https://github.com/acme/a.git
  - url: https://github.com/acme/b.git
`
	base := loadOne(t, "c.yaml", yamlSrc).Digest
	same := map[string]string{
		"cue with comprehension": `// same campaign
version: 1
kind: "Campaign"
id: "c"
title: "C"
template: {
	mode: "report"
	execution: agentic: {prompt: "go", output: schema: {properties: a: type: "string", required: ["a"], type: "object"}}
}
repositories: [for n in ["a", "b"] {url: "https://github.com/acme/\(n).git"}]
`,
		"keys reordered, defaults explicit": `repositories:
  - {name: a, url: https://github.com/acme/a.git}
  - url: https://github.com/acme/b.git
title: C
id: c
kind: Campaign
version: 1
batch_size: 10
template:
  mode: report
  timeout: 1800s
  execution:
    agentic:
      output: {capture: file, schema: {properties: {a: {type: string}}, type: object, required: [a]}}
      prompt: go
`,
	}
	for name, src := range same {
		ext := ".yaml"
		if strings.HasPrefix(name, "cue") {
			ext = ".cue"
		}
		if got := loadOne(t, "c"+ext, src).Digest; got != base {
			t.Errorf("%s: digest %s, want %s", name, got, base)
		}
	}
	changed := map[string]string{
		"prompt":        strings.Replace(yamlSrc, "prompt: go", "prompt: stop", 1),
		"repository":    strings.Replace(yamlSrc, "acme/b.git", "acme/c.git", 1),
		"default value": yamlSrc + "batch_size: 11\n",
		"schema":        strings.Replace(yamlSrc, "type: string", "type: integer", 1),
	}
	for name, src := range changed {
		if got := loadOne(t, "c.yaml", src).Digest; got == base {
			t.Errorf("changed %s: digest unchanged", name)
		}
	}
}

func TestLimits(t *testing.T) {
	ctx := context.Background()
	fsys := fstest.MapFS{}
	for _, n := range []string{"a", "b", "c"} {
		fsys[n+".yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(agenticTask, "id: t", "id: "+n, 1))}
	}
	res, err := (&spec.Loader{Eval: spec.InProcess(1), Limits: spec.Limits{MaxFiles: 2}}).Load(ctx, fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Definitions) != 2 || !strings.Contains(res.Errors.Error(), "c.yaml:1:1: too many definition files: the limit is 2") {
		t.Errorf("file count limit: %d definitions, errors %v", len(res.Definitions), res.Errors)
	}
	res, err = (&spec.Loader{Eval: spec.InProcess(1), Limits: spec.Limits{MaxFileBytes: 100}}).Load(ctx, fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Definitions) != 0 || !strings.Contains(res.Errors.Error(), "a.yaml:1:1: file is 123 bytes; the limit is 100 bytes") {
		t.Errorf("file size limit: %v", res.Errors)
	}
}

// explodes doubles a string 40 times: a terabyte if evaluated to the end.
const explodes = `version: 1
id: "boom"
a0: "xxxxxxxxxxxxxxxx"
a1: a0 + a0
a2: a1 + a1
a3: a2 + a2
a4: a3 + a3
a5: a4 + a4
a6: a5 + a5
a7: a6 + a6
a8: a7 + a7
a9: a8 + a8
a10: a9 + a9
a11: a10 + a10
a12: a11 + a11
a13: a12 + a12
a14: a13 + a13
a15: a14 + a14
a16: a15 + a15
a17: a16 + a16
a18: a17 + a17
a19: a18 + a18
a20: a19 + a19
a21: a20 + a20
a22: a21 + a21
a23: a22 + a22
a24: a23 + a23
a25: a24 + a24
a26: a25 + a25
a27: a26 + a26
a28: a27 + a27
a29: a28 + a28
a30: a29 + a29
a31: a30 + a30
a32: a31 + a31
a33: a32 + a32
a34: a33 + a33
a35: a34 + a34
a36: a35 + a35
a37: a36 + a36
a38: a37 + a37
a39: a38 + a38
title: a39
`

// TestPoolStopsRunawayEvaluation: a definition that grows without end is
// stopped (by the memory limit or the timeout) and the other files, in
// the same worker pool, still load.
func TestPoolStopsRunawayEvaluation(t *testing.T) {
	pool := newPool(t)
	pool.MemoryLimit = 256 << 20
	fsys := fstest.MapFS{
		"boom.cue":  {Data: []byte(explodes)},
		"good.yaml": {Data: []byte(agenticTask)},
	}
	loader := &spec.Loader{Eval: pool, Limits: spec.Limits{EvalTimeout: 20 * time.Second}}
	res, err := loader.Load(context.Background(), fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Definitions) != 1 || res.Definitions[0].ID != "t" {
		t.Errorf("the good file must load: %+v\n%v", res.Definitions, res.Errors)
	}
	got := res.Errors.Error()
	if !strings.Contains(got, "boom.cue:1:1: evaluation used more than the memory limit of 256 MiB; stopped") &&
		!strings.Contains(got, "boom.cue:1:1: evaluation did not finish within") {
		t.Errorf("runaway file: got %q", got)
	}
	// The pool replaced the killed worker and still works.
	res, err = loader.Load(context.Background(), fstest.MapFS{"good.yaml": {Data: []byte(agenticTask)}}, ".")
	if err != nil || len(res.Definitions) != 1 {
		t.Errorf("pool after a runaway: %v %v", err, res.Errors)
	}
}

func TestPoolTimeout(t *testing.T) {
	pool := newPool(t)
	pool.MemoryLimit = 4 << 30
	fsys := fstest.MapFS{"boom.cue": {Data: []byte(explodes)}}
	loader := &spec.Loader{Eval: pool, Limits: spec.Limits{EvalTimeout: 300 * time.Millisecond}}
	res, err := loader.Load(context.Background(), fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Errors.Error(); !strings.Contains(got, "boom.cue:1:1: evaluation did not finish within 300ms; stopped") {
		t.Errorf("got %q", got)
	}
}

func TestLoadFilesReadsOnlyThoseNamed(t *testing.T) {
	fsys := fstest.MapFS{
		"a.yaml":   {Data: []byte(agenticTask)},
		"bad.yaml": {Data: []byte("version: 1\nid: BAD\n")},
		"notes.md": {Data: []byte("# notes")},
	}
	res, err := (&spec.Loader{Eval: spec.InProcess(1)}).LoadFiles(context.Background(), fsys, "a.yaml")
	if err != nil || len(res.Errors) > 0 || len(res.Definitions) != 1 || res.Definitions[0].ID != "t" {
		t.Errorf("LoadFiles(a.yaml): %v %v %+v", err, res.Errors, res.Definitions)
	}
	res, _ = (&spec.Loader{Eval: spec.InProcess(1)}).LoadFiles(context.Background(), fsys, "notes.md")
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Msg, "extension must be") {
		t.Errorf("LoadFiles(notes.md): %v", res.Errors)
	}
}

// A config's notifications load as written; a template that does not
// parse or would cost more than its length, a subscription naming a
// template the config lacks, a glob that is not one and an unknown event
// are refused at the file, line and field, in YAML and in CUE.
func TestConfigNotifications(t *testing.T) {
	evaluators := map[string]spec.Evaluator{"in process": spec.InProcess(1), "worker": newPool(t)}
	good := "version: 1\nnotifications:\n  templates:\n    short: \"{{.Campaign}} {{.Event}}\"\n  subscriptions:\n    - on: [paused, failed]\n      to: [team-slack]\n      campaigns: [\"pay-*\"]\n      template: short\n"
	tests := []struct {
		name, file, body, want string
	}{
		{"valid", "fleetlift.yaml", good, ""},
		{"valid cue", "fleetlift.cue", "version: 1\nnotifications: subscriptions: [{on: [\"done\"], to: [\"audit\"]}]\n", ""},
		{"range", "fleetlift.yaml", strings.Replace(good, "{{.Campaign}} {{.Event}}", "{{range 100000000}}{{end}}", 1),
			"fleetlift.yaml:4:5: notifications.templates.short: short: range is not allowed in a notification template"},
		{"misspelt field", "fleetlift.yaml", strings.Replace(good, "{{.Event}}", "{{.Evnt}}", 1),
			"fleetlift.yaml:4:5: notifications.templates.short: short:1:16: executing \"short\" at <.Evnt>: can't evaluate field Evnt"},
		{"no such template", "fleetlift.yaml", strings.Replace(good, "template: short", "template: long", 1),
			"fleetlift.yaml:9:7: notifications.subscriptions[0].template: no template \"long\" in notifications.templates"},
		{"bad glob", "fleetlift.yaml", strings.Replace(good, `"pay-*"`, `"pay-[a"`, 1),
			"fleetlift.yaml:8:7: notifications.subscriptions[0].campaigns: \"pay-[a\" is not a glob"},
		{"unknown event", "fleetlift.yaml", strings.Replace(good, "[paused, failed]", "[paused, merged]", 1),
			"fleetlift.yaml:6:20: notifications.subscriptions[0].on[1]: \"merged\" must be one of"},
		{"no service", "fleetlift.yaml", strings.Replace(good, "[team-slack]", "[]", 1),
			"fleetlift.yaml:7:7: notifications.subscriptions[0].to: must not be empty"},
		{"cue range", "fleetlift.cue", "version: 1\nnotifications: templates: x: \"{{range 3}}{{end}}\"\n",
			"fleetlift.cue:2:27: notifications.templates.x: x: range is not allowed"},
	}
	for _, tt := range tests {
		for ename, eval := range evaluators {
			t.Run(tt.name+"/"+ename, func(t *testing.T) {
				fsys := fstest.MapFS{tt.file: {Data: []byte(tt.body)}}
				cfg, err := (&spec.Loader{Eval: eval}).LoadConfig(context.Background(), fsys, tt.file)
				if tt.want == "" {
					if err != nil {
						t.Fatal(err)
					}
					if cfg.Notifications == nil || len(cfg.Notifications.Subscriptions) != 1 {
						t.Errorf("notifications: %+v", cfg.Notifications)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("got %v, want an error with %q", err, tt.want)
				}
			})
		}
	}
}
