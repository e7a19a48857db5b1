package spec_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/spec"
)

// invalidApprovalsRoot holds one directory per bad approval record; each
// is loaded with LoadApprovals and its errors compared with its want.txt.
const invalidApprovalsRoot = "../../testdata/invalid-approvals"

const digest = "sha256:9f2c4e1a7b3d5f60182a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d"

func loadApprovals(t *testing.T, files map[string]string, dir string) *spec.ApprovalResult {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	res, err := (&spec.Loader{}).LoadApprovals(context.Background(), fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLoadApprovals(t *testing.T) {
	res := loadApprovals(t, map[string]string{
		"approvals/README.md": "# approvals\n",
		"approvals/payments.yaml": `version: 1
kind: Approval
target: slog-rollout/payments
action: approve
result_digest: ` + digest + `
by: alice
comment: Looks good; the log levels match.
`,
		"approvals/2024/billing.yml": `version: 1
kind: Approval
target: slog-rollout/billing
action: steer
result_digest: ` + digest + `
by: bob
prompt: Keep the request id as a field.
`,
		"approvals/resume.yaml":    "version: 1\nkind: Approval\ntarget: slog-rollout\naction: continue\ngeneration: 4\nby: carol\n",
		"approvals/.hidden/x.yaml": "not: a record\n",
		"campaigns/slog.yaml":      agenticTask,
	}, "approvals")
	if len(res.Errors) > 0 {
		t.Fatalf("errors:\n%v", res.Errors)
	}
	want := []spec.Approval{
		{File: "approvals/2024/billing.yml", Version: 1, Kind: spec.KindApproval, Target: "slog-rollout/billing", Action: "steer", ResultDigest: digest, By: "bob", Prompt: "Keep the request id as a field."},
		{File: "approvals/payments.yaml", Version: 1, Kind: spec.KindApproval, Target: "slog-rollout/payments", Action: "approve", ResultDigest: digest, By: "alice", Comment: "Looks good; the log levels match."},
		{File: "approvals/resume.yaml", Version: 1, Kind: spec.KindApproval, Target: "slog-rollout", Action: "continue", Generation: 4, By: "carol"},
	}
	if !reflect.DeepEqual(res.Approvals, want) {
		t.Errorf("approvals:\n got %+v\nwant %+v", res.Approvals, want)
	}
	if res.Files != 3 {
		t.Errorf("Files = %d, want 3", res.Files)
	}
}

func TestLoadApprovalsNoDirectory(t *testing.T) {
	res := loadApprovals(t, map[string]string{"campaigns/t.yaml": agenticTask}, "approvals")
	if len(res.Approvals) != 0 || len(res.Errors) != 0 || res.Err() != nil {
		t.Errorf("a repository without approvals/: %+v", res)
	}
}

// TestLoadApprovalsTargets: a target is an id, optionally with a
// repository or group, and a repository within a group.
func TestLoadApprovalsTargets(t *testing.T) {
	cases := []struct {
		target string
		ok     bool
	}{
		{"slog-rollout", true},
		{"slog-rollout/payments", true},
		{"slog-rollout/backend/api.v2", true},
		{"slog-rollout/", false},
		{"/payments", false},
		{"slog-rollout/a/b/c", false},
		{"slog-rollout/../x", false},
		{"slog-rollout/-x", false},
		{"Slog", false},
	}
	for _, c := range cases {
		t.Run(c.target, func(t *testing.T) {
			res := loadApprovals(t, map[string]string{"a.yaml": "version: 1\nkind: Approval\naction: retry\nby: alice\ntarget: \"" + c.target + "\"\ngeneration: 1\n"}, ".")
			if got := len(res.Errors) == 0; got != c.ok {
				t.Errorf("valid = %t, want %t; errors: %v", got, c.ok, res.Errors)
			}
			for _, e := range res.Errors {
				if e.Field != "target" || e.Line != 5 {
					t.Errorf("error not on the target field: %v", e)
				}
			}
		})
	}
}

// TestApprovalKindInDefinitions: a record put among the definitions is
// reported there, as a kind the definitions do not have.
func TestApprovalKindInDefinitions(t *testing.T) {
	res := load(t, map[string]string{"campaigns/ok.yaml": "version: 1\nkind: Approval\ntarget: x\naction: continue\nby: alice\n"})
	want := `campaigns/ok.yaml:2:1: kind: kind "Approval" is an approval record, not a definition: records belong under approvals/ at the repository root; a definition has kind Task or Campaign`
	if res.Err() == nil || res.Err().Error() != want {
		t.Errorf("errors:\n%v\nwant:\n%s", res.Err(), want)
	}
}

func TestInvalidApprovals(t *testing.T) {
	cases, err := os.ReadDir(invalidApprovalsRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		t.Run(c.Name(), func(t *testing.T) {
			src := filepath.Join(invalidApprovalsRoot, c.Name())
			res, err := (&spec.Loader{}).LoadApprovals(context.Background(), os.DirFS(src), ".")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Errors) == 0 {
				t.Fatalf("no error for an invalid record; loaded %+v", res.Approvals)
			}
			if len(res.Approvals) != 0 {
				t.Errorf("an invalid record was loaded: %+v", res.Approvals)
			}
			checkGoldenErrors(t, res.Errors, filepath.Join(src, "want.txt"))
		})
	}
}

// TestTemplateApprovalExamples: the records shown in the campaigns
// template's approvals/README.md are valid.
func TestTemplateApprovalExamples(t *testing.T) {
	readme, err := os.ReadFile("../../campaigns-template/approvals/README.md")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	blocks := strings.Split(string(readme), "```yaml\n")
	for i, b := range blocks[1:] {
		body, _, ok := strings.Cut(b, "```")
		if !ok {
			t.Fatalf("yaml block %d is not closed", i)
		}
		files[fmt.Sprintf("approvals/example-%d.yaml", i)] = body
	}
	if len(files) < 3 {
		t.Fatalf("found %d yaml examples, want 3", len(files))
	}
	res := loadApprovals(t, files, "approvals")
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if len(res.Approvals) != len(files) {
		t.Errorf("%d records loaded from %d examples", len(res.Approvals), len(files))
	}
}

// TestLoadApprovalsGuards: records are read with the limits and symlink
// checks of definitions.
func TestLoadApprovalsGuards(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "repo", "approvals")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	record := "version: 1\nkind: Approval\ntarget: slog\naction: continue\ngeneration: 1\nby: alice\n"
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", record)
	write("big.yaml", record+"comment: "+strings.Repeat("x", 2000)+"\n")
	if err := os.WriteFile(filepath.Join(root, "outside.yaml"), []byte(record), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../outside.yaml", filepath.Join(dir, "escape.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.yaml", filepath.Join(dir, "inside.yaml")); err != nil {
		t.Fatal(err)
	}
	loader := &spec.Loader{Limits: spec.Limits{MaxFileBytes: 1000}}
	res, err := loader.LoadApprovals(context.Background(), os.DirFS(filepath.Join(root, "repo")), "approvals")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, a := range res.Approvals {
		files = append(files, a.File)
	}
	if want := []string{"approvals/a.yaml", "approvals/inside.yaml"}; !reflect.DeepEqual(files, want) {
		t.Errorf("loaded %v, want %v", files, want)
	}
	want := "approvals/big.yaml:1:1: file is 2.0 KiB; the limit is 1000 bytes\n" +
		"approvals/escape.yaml:1:1: symlink to ../../outside.yaml leaves the definitions root; refused"
	if got := res.Err(); got == nil || got.Error() != want {
		t.Errorf("errors:\n%v\nwant:\n%s", got, want)
	}

	loader = &spec.Loader{Limits: spec.Limits{MaxFiles: 1}}
	res, err = loader.LoadApprovals(context.Background(), os.DirFS(filepath.Join(root, "repo")), "approvals")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Approvals) != 1 || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Msg, "too many definition files: the limit is 1") {
		t.Errorf("a limit of one file: %d records, errors %v", len(res.Approvals), res.Errors)
	}
}
