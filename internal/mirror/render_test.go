package mirror_test

import (
	"encoding/json"
	"flag"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/mirror"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/state"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestRenderGolden compares every file of a status branch with
// testdata/<case>/<path>; the set of files must match too.
func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name   string
		status reconcile.Status
	}{
		{"everything", everything()},
		{"no campaigns", reconcile.Status{Revision: revision, Time: clock}},
		{"reports", audit()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mirror.Render(tt.status, "main")
			root := filepath.Join("testdata", strings.ReplaceAll(tt.name, " ", "-"))
			if *update {
				os.RemoveAll(root)
				for p, data := range got {
					path := filepath.Join(root, filepath.FromSlash(p))
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := map[string][]byte{}
			err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				data, err := os.ReadFile(path)
				rel, _ := filepath.Rel(root, path)
				want[filepath.ToSlash(rel)] = data
				return err
			})
			if err != nil {
				t.Fatalf("%v (run go test -update to create the golden files)", err)
			}
			if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
				t.Fatalf("files %q, want %q (go test -update rewrites them)", g, w)
			}
			for p := range want {
				if string(got[p]) != string(want[p]) {
					t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", p, filepath.Join(root, p), got[p])
				}
			}
		})
	}
}

func TestRenderWhatAUserReads(t *testing.T) {
	files := mirror.Render(everything(), "main")
	readme, page := string(files["README.md"]), string(files["campaigns/slog-rollout.md"])
	for _, want := range []string{
		"| [`slog-rollout`](campaigns/slog-rollout.md) | Campaign | awaiting_approval | 2 | 1 / 1 / 4 | 1 open | 1 |",
		"| [`version-bump`](campaigns/version-bump.md) | Task | completed (suspended) | 1 | 1 / 0 / 1 | 1 merged | 0 |",
		"commit this file as `approvals/slog-rollout__payments.yaml` to `main`",
		"target: slog-rollout/payments\naction: approve\nresult_digest: " + digest + "\ngeneration: 2\nby: <you>\n",
		"| `payments` | 2 | 13 | 5 |",
		"- create `search-cleanup`: start workflow: deadline exceeded",
		"- `campaigns/broken.yaml:4:8`: title: must be a string",
		"the result changed since it was approved",
		"`old-cleanup` is orphaned",
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md lacks %q:\n%s", want, readme)
		}
	}
	for _, want := range []string{
		"| `api` | completed | `fleetlift/slog` | <" + apiPR + "> | open, approved, checks failure (ci/build), conflicting, pushed to by others |",
		"| `payments` | `go.mod` | 3 | 1 |",
		"result_digest: " + digest,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("campaigns/slog-rollout.md lacks %q:\n%s", want, page)
		}
	}
	var st struct {
		FormatVersion int              `json:"format_version"`
		Revision      string           `json:"revision"`
		Campaigns     []state.Campaign `json:"campaigns"`
		Errors        []struct{ File string }
		Outcomes      []struct{ ID, Error string }
	}
	if err := json.Unmarshal(files["status.json"], &st); err != nil {
		t.Fatalf("status.json: %v", err)
	}
	if st.FormatVersion != 1 || st.Revision != revision || len(st.Campaigns) != 3 || st.Campaigns[0].Phase != state.PhaseAwaitingApproval ||
		len(st.Errors) != 1 || len(st.Outcomes) != 2 || st.Outcomes[0].Error == "" {
		t.Errorf("status.json = %+v", st)
	}
	if len(st.Campaigns[0].Spec) != 0 {
		t.Errorf("status.json carries the spec: %s", st.Campaigns[0].Spec)
	}
}

// TestMirrorShowsACampaignThatEndedWithFailures: a campaign that ended
// with a failed repository reads as such on the status branch, in the
// table, on its page and in status.json; not as plain "completed".
// A report campaign gets a page of its reports, linked from the status
// and the campaign's page: the table (columns from the output schema,
// the required score first) and each report in a file of its own, the
// invalid one with its raw text; status.json keeps the reports without
// their texts.
func TestRenderReports(t *testing.T) {
	files := mirror.Render(audit(), "main")
	dir := mirror.ReportDir("auth-audit")
	page := string(files[dir+"/README.md"])
	for _, want := range []string{
		"3 reports: 1 valid, 1 empty, 1 invalid.",
		"| Repository | Status | `score` | `auth_library` | Problems | Report |",
		"| `api` | valid | 8 | oauth2-proxy |  | [api.md](api.md) |",
		"| `billing` | **invalid** | 11 | custom | /score: maximum: got 11, want 10 | [billing.md](billing.md) |",
		"| `search` | **empty** (look at it) |  |  | the report is empty: a person should look at this repository |  |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report page lacks %q:\n%s", want, page)
		}
	}
	if api := string(files[dir+"/api.md"]); !strings.Contains(api, "Sessions expire after **15 minutes**.") {
		t.Errorf("api.md does not hold the body:\n%s", api)
	}
	if billing := string(files[dir+"/billing.md"]); !strings.Contains(billing, "```markdown\n---\nauth_library: custom\nscore: 11\n---") {
		t.Errorf("billing.md does not show what the agent wrote:\n%s", billing)
	}
	if _, ok := files[dir+"/search.md"]; ok {
		t.Error("the empty report has a file of its own")
	}
	readme, campaign := string(files["README.md"]), string(files["campaigns/auth-audit.md"])
	if !strings.Contains(readme, "- [`auth-audit`](reports/auth-audit/README.md): 3 reports: 1 valid, 1 empty, 1 invalid") {
		t.Errorf("README.md does not link the reports:\n%s", readme)
	}
	if !strings.Contains(campaign, "[reports/auth-audit/](../reports/auth-audit/README.md)") {
		t.Errorf("the campaign page does not link the reports:\n%s", campaign)
	}
	var st struct {
		Campaigns []state.Campaign `json:"campaigns"`
	}
	if err := json.Unmarshal(files["status.json"], &st); err != nil {
		t.Fatal(err)
	}
	if r := st.Campaigns[0].Reports; len(r) != 3 || r[1].Repository != "billing" || r[1].Status != state.ReportInvalid ||
		len(r[1].ValidationErrors) != 1 || r[0].Body != "" || r[1].Raw != "" {
		t.Errorf("status.json reports, sorted and without their texts: %+v", r)
	}

	// Another order of the same reports renders the same.
	b := audit()
	slices.Reverse(b.Campaigns[0].Reports)
	if !maps.EqualFunc(files, mirror.Render(b, "main"), func(x, y []byte) bool { return string(x) == string(y) }) {
		t.Errorf("reordered reports render differently")
	}
}

// TestMirrorShowsWhatBecameOfPullRequests: the state the worker last read
// of each pull request, with what decides whether it merges.
func TestMirrorShowsWhatBecameOfPullRequests(t *testing.T) {
	page := string(mirror.Render(everything(), "main")["campaigns/slog-rollout.md"])
	if want := "| open, approved, checks failure (ci/build), conflicting, pushed to by others |"; !strings.Contains(page, want) {
		t.Errorf("campaigns/slog-rollout.md lacks %q:\n%s", want, page)
	}
}

func TestMirrorShowsACampaignThatEndedWithFailures(t *testing.T) {
	files := mirror.Render(everything(), "main")
	readme, page := string(files["README.md"]), string(files["campaigns/tls-upgrade.md"])
	if want := "| [`tls-upgrade`](campaigns/tls-upgrade.md) | Campaign | completed_with_failures | 1 | 2 / 1 / 3 | 1 open, 1 merged | 0 |"; !strings.Contains(readme, want) {
		t.Errorf("README.md lacks %q:\n%s", want, readme)
	}
	for _, want := range []string{
		"| Phase | completed_with_failures |",
		"| Message | 1 of 3 repositories failed, 2 completed |",
		"| `billing` | failed |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("campaigns/tls-upgrade.md lacks %q:\n%s", want, page)
		}
	}
	var st struct {
		Campaigns []state.Campaign `json:"campaigns"`
	}
	if err := json.Unmarshal(files["status.json"], &st); err != nil {
		t.Fatalf("status.json: %v", err)
	}
	for _, c := range st.Campaigns {
		if c.ID == "tls-upgrade" && (c.Phase != state.PhaseCompletedWithFailures || c.Message != "1 of 3 repositories failed, 2 completed") {
			t.Errorf("status.json: tls-upgrade is %s (%s)", c.Phase, c.Message)
		}
	}
}

// The same status with its lists in another order gives the same files,
// and rendering leaves the status as it was.
func TestRenderIsDeterministic(t *testing.T) {
	a := everything()
	b := everything()
	slices.Reverse(b.Campaigns[0].Repos)
	slices.Reverse(b.Campaigns[0].PendingApprovals[0].Repos[0].Files)
	slices.Reverse(b.Campaigns)
	slices.Reverse(b.Outcomes)
	before, _ := json.Marshal(b.Campaigns)

	fa, fb := mirror.Render(a, "main"), mirror.Render(b, "main")
	if !maps.EqualFunc(fa, fb, func(x, y []byte) bool { return string(x) == string(y) }) {
		t.Errorf("reordered status renders differently")
	}
	if after, _ := json.Marshal(b.Campaigns); string(after) != string(before) {
		t.Errorf("Render changed the status it was given")
	}
}

func TestPaths(t *testing.T) {
	tests := []struct{ name, got, prefix, suffix string }{
		{"campaign page", mirror.PagePath("slog-rollout"), "campaigns/slog-rollout.md", ""},
		// Hashed so that two such ids never share a page.
		{"id that is no file name", mirror.PagePath("../etc/passwd"), "campaigns/etc-passwd-", ".md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, name, _ := strings.Cut(tt.got, "/")
			if !strings.HasPrefix(tt.got, tt.prefix) || !strings.HasSuffix(tt.got, tt.suffix) ||
				strings.Contains(name, "/") || strings.Contains(name, "..") || (tt.suffix == "" && tt.got != tt.prefix) {
				t.Errorf("got %q (in %s), want %q…%q", tt.got, dir, tt.prefix, tt.suffix)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	tests := []struct {
		name   string
		status reconcile.Status
		want   string
	}{
		{"everything", everything(), "fleetlift status at 4d816c4e0b5a: 3 campaigns, 1 awaiting approval\n"},
		{"one", one(), "fleetlift status at 4d816c4e0b5a: 1 campaign, 0 awaiting approval\n"},
		{"no campaigns", reconcile.Status{Revision: revision}, "fleetlift status at 4d816c4e0b5a: 0 campaigns, 0 awaiting approval\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mirror.Message(tt.status); got != tt.want {
				t.Errorf("Message = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRenderCarriedOutRecordsApply: approval records the runs carried
// out are not listed among those that do not apply.
func TestRenderCarriedOutRecordsApply(t *testing.T) {
	s := one()
	s.Plan.Approvals = []plan.ApprovalChange{{
		Record: approval.Record{File: "approvals/ledger.yaml", Target: "demo/ledger", Action: approval.Approve, By: "robin"},
		Status: plan.ApprovalDone, Reason: "carried out by the current run",
	}}
	readme := string(mirror.Render(s, "main")["README.md"])
	if strings.Contains(readme, "do not apply") || strings.Contains(readme, "approvals/ledger.yaml") {
		t.Errorf("a carried-out record is listed as not applying:\n%s", readme)
	}
}

// TestRenderPausedCampaign: a paused campaign's page shows the record
// that resumes it, naming the run's generation.
func TestRenderPausedCampaign(t *testing.T) {
	s := one()
	s.Campaigns = []state.Campaign{{ID: "slog-rollout", Kind: state.KindCampaign, Phase: state.PhasePaused, Generation: 3}}
	page := string(mirror.Render(s, "main")["campaigns/slog-rollout.md"])
	want := "target: slog-rollout\naction: continue\ngeneration: 3\nby: <you>\n"
	if !strings.Contains(page, want) || !strings.Contains(page, "commit this file as `approvals/slog-rollout.yaml` to `main`") {
		t.Errorf("the page of a paused campaign lacks %q:\n%s", want, page)
	}
}
