package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"gopkg.in/yaml.v3"
)

// ProposalBranchPrefix is where a proposal of approval records (approve
// --git --pull-request) is pushed: ProposalBranch names the branch.
const ProposalBranchPrefix = "fleetlift/approval-record/"

// Draft is an approval record about to be written to the campaigns
// repository: the decision, to go to Record.File, and a comment for
// people, kept in the file and not acted on.
//
// Encode writes it; package spec's loader reads it back (package desired
// turns what it reads into a Record), and the two are inverses: a Draft
// reads back as its Record and Comment.
type Draft struct {
	Record
	Comment string
}

// NewDraft is the draft of r with comment, at RecordPath(r.Target).
func NewDraft(r Record, comment string) Draft {
	r.File = RecordPath(r.Target)
	return Draft{Record: r, Comment: comment}
}

// fileLayout is a record file's layout: the fields in the order the
// approvals README shows them.
type fileLayout struct {
	Version      int    `yaml:"version"`
	Kind         string `yaml:"kind"`
	Target       string `yaml:"target"`
	Action       string `yaml:"action"`
	ResultDigest string `yaml:"result_digest,omitempty"`
	Generation   int64  `yaml:"generation,omitempty"`
	By           string `yaml:"by"`
	Prompt       string `yaml:"prompt,omitempty"`
	Comment      string `yaml:"comment,omitempty"`
}

// Encode is the record file: version 1 and kind Approval, then the
// record's fields in the order the approvals README shows them, as YAML
// indented by two spaces.
func (d Draft) Encode() []byte {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	// Encoding a struct of strings cannot fail.
	_ = enc.Encode(fileLayout{Version: 1, Kind: "Approval", Target: d.Target, Action: string(d.Action),
		ResultDigest: d.ResultDigest, Generation: d.Generation, By: d.By, Prompt: d.Prompt, Comment: d.Comment})
	_ = enc.Close()
	return b.Bytes()
}

// peek reads a record file as far as its YAML goes, without the checks
// the reconciler makes: enough to say what a file holds.
func peek(b []byte) (fileLayout, bool) {
	var l fileLayout
	if yaml.Unmarshal(b, &l) != nil {
		return fileLayout{}, false
	}
	return l, true
}

// TakenError says that a draft's file holds a different record.
type TakenError struct {
	// Path is the draft's file.
	Path string
	// Holds says what the file holds, as far as it can be read.
	Holds string
}

func (e *TakenError) Error() string {
	return fmt.Sprintf("%s already holds a different record (%s)", e.Path, e.Holds)
}

// Place decides the file of each draft and reports which files the
// drafts change, given read, which returns a file of the campaigns
// repository by its slash-separated path (an error wrapping
// fs.ErrNotExist when there is none).
//
// A file holding a different record is replaced only with force (else a
// *TakenError). An approval of the same result by another approver is no
// different record to replace: the draft goes beside it, to
// SecondRecordPath, so that both count.
func Place(drafts []Draft, read func(name string) ([]byte, error), force bool) (map[string]bool, error) {
	changed := map[string]bool{}
	for i := range drafts {
		d := &drafts[i]
		body := d.Encode()
		old, err := read(d.File)
		if err == nil && !bytes.Equal(old, body) && !force && d.seconds(old) {
			d.File = SecondRecordPath(d.Target, d.By)
			old, err = read(d.File)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			changed[d.File] = true
		case err != nil:
			return nil, err
		case bytes.Equal(old, body):
		case force:
			changed[d.File] = true
		default:
			return nil, &TakenError{Path: d.File, Holds: describe(old)}
		}
	}
	return changed, nil
}

// seconds reports whether the record file old approves what d approves,
// as another approver.
func (d *Draft) seconds(old []byte) bool {
	o, ok := peek(old)
	if !ok {
		return false
	}
	approve := string(Approve)
	return d.Action == Approve && o.Action == approve && o.Target == d.Target &&
		o.ResultDigest == d.ResultDigest && o.By != "" && o.By != d.By
}

// describe says what a record file holds, as far as it can be read.
func describe(b []byte) string {
	r, ok := peek(b)
	if !ok || r.Action == "" {
		return "not a record fleetlift can read"
	}
	s := r.Action
	if r.By != "" {
		s += " by " + r.By
	}
	if r.ResultDigest != "" {
		s += " of " + ShortDigest(r.ResultDigest)
	}
	return s
}

// CommitSubject is the subject of the commit that adds drafts, all of
// one action: "Approve slog-rollout/payments (sha256:9f2c4e1a7b3d)", or
// for several "Approve 3 results of slog-rollout".
func CommitSubject(drafts []Draft) string {
	action := string(drafts[0].Action)
	verb := strings.ToUpper(action[:1]) + action[1:]
	if len(drafts) == 1 {
		return fmt.Sprintf("%s %s (%s)", verb, drafts[0].Target, ShortDigest(drafts[0].ResultDigest))
	}
	return fmt.Sprintf("%s %d results of %s", verb, len(drafts), drafts[0].Campaign())
}

// CommitMessage is CommitSubject and, for several drafts or a steer, a
// body that lists them or gives the prompt.
func CommitMessage(drafts []Draft) string {
	msg := CommitSubject(drafts)
	var body []string
	if len(drafts) > 1 {
		for _, d := range drafts {
			body = append(body, fmt.Sprintf("- %s (%s)", d.Target, ShortDigest(d.ResultDigest)))
		}
	}
	if drafts[0].Action == Steer && drafts[0].Prompt != "" {
		body = append(body, "", drafts[0].Prompt)
	}
	if len(body) > 0 {
		msg += "\n\n" + strings.TrimLeft(strings.Join(body, "\n"), "\n")
	}
	return msg
}

// ProposalBranch is the branch a proposal of drafts is pushed to:
// ProposalBranchPrefix, then PathName of the one target and the first 12
// hex digits of its digest, or for several PathName of their campaign
// and 12 hex digits of a hash of all their targets and digests.
func ProposalBranch(drafts []Draft) string {
	if len(drafts) == 1 {
		return ProposalBranchPrefix + PathName(drafts[0].Target) + "-" + digestHex(drafts[0].ResultDigest)
	}
	h := sha256.New()
	for _, d := range drafts {
		fmt.Fprintf(h, "%s %s\n", d.Target, d.ResultDigest)
	}
	return ProposalBranchPrefix + PathName(drafts[0].Campaign()) + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

func digestHex(d string) string {
	h := strings.TrimPrefix(d, "sha256:")
	return h[:min(12, len(h))]
}

// ShortDigest is "sha256:" and the first 12 hex digits of a digest, as
// people are shown one.
func ShortDigest(d string) string {
	const n = len("sha256:") + 12
	if len(d) > n {
		return d[:n]
	}
	return d
}
