package approval_test

import (
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
)

func TestValidate(t *testing.T) {
	ok := approval.Record{File: "approvals/a.yaml", Target: "slog/payments", ResultDigest: "sha256:1", By: "alice", Action: approval.Approve}
	cases := []struct {
		name string
		edit func(*approval.Record)
		want string
	}{
		{"approve with digest", func(*approval.Record) {}, ""},
		{"continue needs no digest", func(r *approval.Record) {
			r.Action, r.Target, r.ResultDigest, r.Generation = approval.Continue, "slog", "", 2
		}, ""},
		{"retry one task", func(r *approval.Record) { r.Action, r.ResultDigest, r.Generation = approval.Retry, "", 1 }, ""},
		{"approve of one generation", func(r *approval.Record) { r.Generation = 3 }, ""},
		{"continue without generation", func(r *approval.Record) { r.Action, r.Target, r.ResultDigest = approval.Continue, "slog", "" },
			"no generation: continue must name the run it decides about (the generation `fleetlift status` shows)"},
		{"retry without generation", func(r *approval.Record) { r.Action = approval.Retry },
			"no generation: retry must name the run it decides about (the generation `fleetlift status` shows)"},
		{"no action", func(r *approval.Record) { r.Action = "" }, "no action"},
		{"unknown action", func(r *approval.Record) { r.Action = "merge" }, `unknown action "merge"`},
		{"no target", func(r *approval.Record) { r.Target = "" }, "no target"},
		{"approve without digest", func(r *approval.Record) { r.ResultDigest = "" }, "no result digest: approve must name the result it saw"},
		{"steer without prompt", func(r *approval.Record) { r.Action = approval.Steer }, "steer without a prompt"},
		{"abort one task", func(r *approval.Record) { r.Action, r.Generation = approval.Abort, 1 }, "abort applies to a whole campaign, not to slog/payments"},
		{"several problems", func(r *approval.Record) { r.Action, r.ResultDigest = approval.Steer, "" }, "no result digest: steer must name the result it saw; steer without a prompt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ok
			c.edit(&r)
			err := r.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("Validate() = %q, want %q", got, c.want)
			}
		})
	}
}

func TestTarget(t *testing.T) {
	cases := []struct{ target, campaign, unit string }{
		{"slog", "slog", ""},
		{"slog/payments", "slog", "payments"},
		{"slog/backend/api", "slog", "backend/api"},
	}
	for _, c := range cases {
		r := approval.Record{Target: c.target}
		if r.Campaign() != c.campaign || r.Unit() != c.unit {
			t.Errorf("%q: Campaign() = %q, Unit() = %q; want %q, %q", c.target, r.Campaign(), r.Unit(), c.campaign, c.unit)
		}
	}
}

func TestParseAction(t *testing.T) {
	for _, a := range approval.Actions() {
		got, err := approval.ParseAction(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAction(%q) = %q, %v", a, got, err)
		}
	}
	if _, err := approval.ParseAction("Approve"); err == nil {
		t.Error(`ParseAction("Approve"): want an error (names are lower case)`)
	}
}
