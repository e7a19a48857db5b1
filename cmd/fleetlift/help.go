package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// commandHelp is what a command's help adds after its description: its
// examples, and what exit status 1 means for it (0 and 2 mean the same
// for every command: see exitCodes).
type commandHelp struct {
	examples []string
	failed   string
	more     []string
}

// helps is the help every command gets, by name. The examples are real
// invocations: TestEveryCommandHasExamplesAndExitCodes parses each.
var helps = map[string]commandHelp{
	"validate": {
		examples: []string{"fleetlift validate campaigns/", "fleetlift validate -o json examples/"},
		failed:   "a definition is invalid, or the directory could not be read",
	},
	"migrate": {
		examples: []string{"fleetlift migrate --file campaigns/slog.yaml --to cue --out campaigns/slog.cue",
			"fleetlift migrate --file campaigns/slog.yaml --defaults explicit"},
		failed: "the definition is invalid, or could not be read or written",
	},
	"plan": {
		examples: []string{"fleetlift plan --repo .",
			"fleetlift plan --repo . --ref feature --base main -o markdown",
			"fleetlift plan --repo . --base main --state none --detailed-exitcode"},
		failed: "the plan could not be made, or a definition is invalid",
		more: []string{"With --detailed-exitcode, as with terraform plan: 0 no changes, 1 an error",
			"(a wrong command line too), 2 the plan has changes."},
	},
	"run": {
		examples: []string{"fleetlift run --file examples/go-version-bump.cue --allow-file-root ~/src",
			"fleetlift run --file campaign.yaml --detach",
			"fleetlift run --file campaign.yaml --failed-only",
			"fleetlift run --file task.yaml --sandbox docker"},
		failed: "the run could not start, or a repository failed or was cancelled",
	},
	"up": {
		examples: []string{"fleetlift up --repo ~/campaigns",
			"fleetlift up --repo https://github.com/acme/campaigns --forge-type github --ui-listen 127.0.0.1:8233"},
		failed: "it could not start, or stopped on an error (it runs until interrupted: then 0)",
	},
	"reconcile": {
		examples: []string{"fleetlift reconcile --repo https://github.com/acme/campaigns --temporal-address temporal:7233",
			"fleetlift reconcile --repo ~/campaigns --once"},
		failed: "it could not start or stopped on an error; with --once, a pass had failures",
	},
	"demo": {
		examples: []string{"fleetlift demo", "fleetlift demo --dir /tmp/fleetlift-demo --keep-running"},
		failed:   "the walk-through failed",
	},
	"status": {
		examples: []string{"fleetlift status", "fleetlift status slog-rollout --diff", "fleetlift status campaign/slog-rollout -o json"},
		failed:   "no such run, or Temporal could not be reached",
	},
	"prs": {
		examples: []string{"fleetlift prs", "fleetlift prs slog-rollout --state open --state draft", "fleetlift prs campaign/slog-rollout --refresh -o json"},
		failed:   "no such run, Temporal could not be reached, or --refresh got no answer from a worker",
	},
	"reports": {
		examples: []string{"fleetlift reports auth-audit", "fleetlift reports campaign/auth-audit -o csv > audit.csv",
			"fleetlift reports auth-audit --out-dir reports/"},
		failed: "no such run, or its reports could not be read",
	},
	"server": {
		examples: []string{"fleetlift server", "fleetlift server --temporal-address 0.0.0.0:7233 --ui-listen 127.0.0.1:8233 --log-level info"},
		failed:   "the server could not start (its port taken, its database unusable) or stopped on an error",
	},
	"worker": {
		examples: []string{"fleetlift worker --sandbox docker",
			"fleetlift worker --sandbox kubernetes --temporal-address temporal:7233 --metrics-listen :9464"},
		failed: "the worker could not start or stopped on an error",
	},
	"approve": {
		examples: []string{"fleetlift approve slog-rollout --digest sha256:9f2c4e1a7b3d",
			"fleetlift approve slog-rollout --git ~/campaigns --push"},
		failed: "nothing awaits approval with that digest, or the decision could not be sent or committed",
	},
	"reject": {
		examples: []string{"fleetlift reject slog-rollout --digest sha256:9f2c4e1a7b3d",
			"fleetlift reject slog-rollout --git ~/campaigns --pull-request"},
		failed: "nothing awaits approval with that digest, or the decision could not be sent or committed",
	},
	"steer": {
		examples: []string{"fleetlift steer task/bump-go --digest sha256:9f2c4e1a7b3d --prompt 'keep the go.sum changes out'",
			"fleetlift steer slog-rollout --repository payments --digest sha256:9f2c4e1a7b3d --prompt 'use slog.Default'"},
		failed: "nothing awaits approval with that digest, or the feedback could not be sent or committed",
	},
	"continue": {
		examples: []string{"fleetlift continue slog-rollout", "fleetlift continue slog-rollout --skip-remaining"},
		failed:   "no such campaign, or the signal could not be sent",
	},
	"abort": {
		examples: []string{"fleetlift abort slog-rollout", "fleetlift abort campaign/slog-rollout --temporal-address temporal:7233"},
		failed:   "no such campaign, or the signal could not be sent",
	},
	"retry": {
		examples: []string{"fleetlift retry slog-rollout --failed-only"},
		failed:   "no such campaign, or the retry could not be sent",
	},
	"version": {
		examples: []string{"fleetlift version", "fleetlift version -o json"},
		failed:   "the output could not be written",
	},
	"schema": {
		examples: []string{"fleetlift schema campaign > campaign.schema.json", "fleetlift schema --dir .vscode/schemas"},
		failed:   "an unknown kind, or the files could not be written",
	},
}

// documentCommands gives every command under root its examples and its
// exit statuses, from helps.
func documentCommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		h, ok := helps[c.Name()]
		if !ok {
			continue
		}
		c.Example = "  " + strings.Join(h.examples, "\n  ")
		long := c.Long
		if long == "" {
			long = c.Short
		}
		c.Long = long + exitCodes(h.failed, h.more...)
	}
}
