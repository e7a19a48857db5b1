package approval_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/spec"
)

const (
	digest1 = "sha256:9f2c4e1a7b3d5f60182a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d"
	digest2 = "sha256:0d6e1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d"
)

// TestDraftRoundTrip: a draft is written as the approvals README shows
// records, and the reconciler's reader (package desired over spec's
// loader) reads it back as the same decision.
func TestDraftRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		draft   approval.Draft
		want    string
		comment string
	}{{
		name:  "approve with a comment",
		draft: approval.NewDraft(approval.Record{Target: "slog-rollout/payments", ResultDigest: digest1, By: "robin", Action: approval.Approve}, "Checked go.mod: yes"),
		want: "version: 1\nkind: Approval\ntarget: slog-rollout/payments\naction: approve\nresult_digest: " + digest1 +
			"\nby: robin\ncomment: 'Checked go.mod: yes'\n",
	}, {
		name:  "reject of a generation",
		draft: approval.NewDraft(approval.Record{Target: "slog-rollout/backend/api", ResultDigest: digest2, Generation: 3, By: "alice", Action: approval.Reject}, ""),
		want:  "version: 1\nkind: Approval\ntarget: slog-rollout/backend/api\naction: reject\nresult_digest: " + digest2 + "\ngeneration: 3\nby: alice\n",
	}, {
		name: "steer with a prompt of two lines",
		draft: approval.NewDraft(approval.Record{Target: "go-version", ResultDigest: digest1, By: "robin", Action: approval.Steer,
			Prompt: "Keep go 1.21 in tools/go.mod.\nOnly the root module."}, ""),
		want: "version: 1\nkind: Approval\ntarget: go-version\naction: steer\nresult_digest: " + digest1 +
			"\nby: robin\nprompt: |-\n  Keep go 1.21 in tools/go.mod.\n  Only the root module.\n",
	}, {
		name:  "continue",
		draft: approval.NewDraft(approval.Record{Target: "slog-rollout", Generation: 2, By: "robin", Action: approval.Continue}, ""),
		want:  "version: 1\nkind: Approval\ntarget: slog-rollout\naction: continue\ngeneration: 2\nby: robin\n",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if want := approval.RecordPath(tc.draft.Target); tc.draft.File != want {
				t.Errorf("draft at %s, want %s", tc.draft.File, want)
			}
			if got := string(tc.draft.Encode()); got != tc.want {
				t.Errorf("Encode:\n%s\nwant:\n%s", got, tc.want)
			}
			fsys := fstest.MapFS{
				"campaigns":   {Mode: fs.ModeDir | 0o755},
				tc.draft.File: {Data: tc.draft.Encode()},
			}
			rev, err := desired.Read(context.Background(), &spec.Loader{}, fsys, "0123456789abcdef0123456789abcdef01234567", "campaigns")
			if err != nil {
				t.Fatal(err)
			}
			if len(rev.Desired.Errors) > 0 {
				t.Fatalf("read back with errors: %v", rev.Desired.Errors)
			}
			if len(rev.Desired.Approvals) != 1 || rev.Desired.Approvals[0] != tc.draft.Record {
				t.Errorf("read back as %+v, want %+v", rev.Desired.Approvals, tc.draft.Record)
			}
			if err := desired.CheckDrafts(context.Background(), &spec.Loader{}, []approval.Draft{tc.draft}); err != nil {
				t.Errorf("CheckDrafts: %v", err)
			}
		})
	}
}

// TestPlace: where drafts go among the records already there.
func TestPlace(t *testing.T) {
	const target = "slog-rollout/payments"
	robin := approval.NewDraft(approval.Record{Target: target, ResultDigest: digest1, By: "robin", Action: approval.Approve}, "")
	first, second := approval.RecordPath(target), approval.SecondRecordPath(target, "robin")
	alice := approval.NewDraft(approval.Record{Target: target, ResultDigest: digest1, By: "alice", Action: approval.Approve}, "")
	aliceOther := approval.NewDraft(approval.Record{Target: target, ResultDigest: digest2, By: "alice", Action: approval.Approve}, "")
	tests := []struct {
		name     string
		files    map[string]string
		force    bool
		wantFile string
		changed  bool
		wantErr  string
	}{
		{name: "no record yet", wantFile: first, changed: true},
		{name: "no change", files: map[string]string{first: string(robin.Encode())}, wantFile: first},
		{name: "a different record is kept", files: map[string]string{first: string(aliceOther.Encode())},
			wantErr: first + " already holds a different record (approve by alice of sha256:0d6e1c2b3a4f)"},
		{name: "a file that is no record is kept", files: map[string]string{first: "[not: a record"},
			wantErr: first + " already holds a different record (not a record fleetlift can read)"},
		{name: "force replaces a different record", files: map[string]string{first: string(aliceOther.Encode())}, force: true, wantFile: first, changed: true},
		{name: "a second approver goes beside the first", files: map[string]string{first: string(alice.Encode())}, wantFile: second, changed: true},
		{name: "the second approver again is no change", files: map[string]string{first: string(alice.Encode()), second: string(robin.Encode())}, wantFile: second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			read := func(name string) ([]byte, error) {
				if s, ok := tc.files[name]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}
			drafts := []approval.Draft{robin}
			changed, err := approval.Place(drafts, read, tc.force)
			if tc.wantErr != "" {
				var taken *approval.TakenError
				if !errors.As(err, &taken) || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want a TakenError saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if drafts[0].File != tc.wantFile || changed[tc.wantFile] != tc.changed || len(changed) > 1 {
				t.Errorf("placed at %s, changed %v; want %s, changed %t", drafts[0].File, changed, tc.wantFile, tc.changed)
			}
		})
	}
}

// TestCommitMessageAndBranch: the commit and the proposal branch of one
// draft and of several.
func TestCommitMessageAndBranch(t *testing.T) {
	one := []approval.Draft{approval.NewDraft(approval.Record{Target: "go-version/payments", ResultDigest: digest1, By: "robin", Action: approval.Approve}, "")}
	several := []approval.Draft{
		approval.NewDraft(approval.Record{Target: "go-version/payments", ResultDigest: digest1, By: "robin", Action: approval.Steer, Prompt: "Only the root module."}, ""),
		approval.NewDraft(approval.Record{Target: "go-version/ledger", ResultDigest: digest2, By: "robin", Action: approval.Steer, Prompt: "Only the root module."}, ""),
	}
	tests := []struct {
		name, got, want string
	}{
		{"message of one", approval.CommitMessage(one), "Approve go-version/payments (sha256:9f2c4e1a7b3d)"},
		{"message of several steers", approval.CommitMessage(several),
			"Steer 2 results of go-version\n\n- go-version/payments (sha256:9f2c4e1a7b3d)\n- go-version/ledger (sha256:0d6e1c2b3a4f)\n\nOnly the root module."},
		{"steer of one", approval.CommitMessage(several[:1]), "Steer go-version/payments (sha256:9f2c4e1a7b3d)\n\nOnly the root module."},
		{"branch of one", approval.ProposalBranch(one), "fleetlift/approval-record/go-version__payments-9f2c4e1a7b3d"},
		{"branch of several", approval.ProposalBranch(several)[:len("fleetlift/approval-record/go-version-")], "fleetlift/approval-record/go-version-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
	if a, b := approval.ProposalBranch(several), approval.ProposalBranch(several[1:]); a == b {
		t.Errorf("several and one share the branch %s", a)
	}
}
