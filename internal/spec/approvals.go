package spec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"cuelang.org/go/cue"
)

// ApprovalResult is what LoadApprovals found: every valid record, sorted
// by file, and every error in every file. A broken record never hides the
// valid ones.
type ApprovalResult struct {
	Approvals []Approval
	Errors    Errors
	// Files counts the record files read.
	Files int
}

// Err returns the errors as one error, or nil when there are none.
func (r *ApprovalResult) Err() error {
	if len(r.Errors) == 0 {
		return nil
	}
	return r.Errors
}

// LoadApprovals reads every approval record under dir in fsys (the
// campaigns repository's "approvals"): one YAML file (.yaml or .yml) per
// record, unified with the schema's #Approval. Loading is bounded and
// guarded as Load's is (file size and count, symlinks that leave the
// root), files and directories whose names start with "." are skipped,
// and other files (a README.md) are ignored. A .cue file is an error:
// records are data, never programs.
//
// A dir that does not exist holds no records and is no error. The
// returned error is for problems that stop loading as a whole (dir cannot
// be read, ctx cancelled); problems with files are in
// ApprovalResult.Errors, each with its file, line, column and field.
func (l *Loader) LoadApprovals(ctx context.Context, fsys fs.FS, dir string) (*ApprovalResult, error) {
	lim := l.Limits.withDefaults()
	if _, err := fs.Stat(fsys, dir); errors.Is(err, fs.ErrNotExist) {
		return &ApprovalResult{}, nil
	}
	names, errs, err := collect(fsys, dir, lim)
	if err != nil {
		return nil, err
	}
	b := l.bounds()
	res := &ApprovalResult{}
	res.Errors = append(res.Errors, errs...)
	var inputs []Input
	for _, name := range names {
		if b.spent() {
			res.Errors = append(res.Errors, b.budgetError(name, false))
			continue
		}
		if path.Ext(name) == ".cue" {
			res.Errors = append(res.Errors, &Error{File: name, Line: 1, Column: 1,
				Msg: "approval records are YAML files (.yaml or .yml); definitions in CUE belong with the other definitions (watch.path)"})
			continue
		}
		data, e := readLimited(fsys, name, lim.MaxFileBytes)
		if e != nil {
			res.Errors = append(res.Errors, e)
			continue
		}
		inputs = append(inputs, Input{Name: name, Data: data, Approval: true})
	}
	res.Files = len(inputs)
	outs, _, err := l.evaluate(ctx, b, inputs)
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		if len(o.Errors) > 0 {
			res.Errors = append(res.Errors, o.Errors...)
			continue
		}
		a := Approval{File: o.Name}
		if err := strictDecode(o.JSON, &a); err != nil {
			res.Errors = append(res.Errors, &Error{File: o.Name, Line: 1, Column: 1, Msg: "decode: " + err.Error()})
			continue
		}
		a.File = o.Name
		res.Approvals = append(res.Approvals, a)
	}
	slices.SortFunc(res.Approvals, func(a, b Approval) int { return strings.Compare(a.File, b.File) })
	sortErrors(res.Errors)
	return res, nil
}

// approvalKind checks the kind of a file read as an approval record, and
// says where a file that is something else belongs.
func approvalKind(in Input, data cue.Value) (Kind, *Error) {
	v := data.LookupPath(cue.MakePath(cue.Str("kind")))
	e := &Error{File: in.Name, Field: "kind"}
	if !v.Exists() {
		setPos(e, in.Name, data.Pos())
		e.Msg = "field is required: an approval record has kind: Approval"
		if data.LookupPath(cue.MakePath(cue.Str("id"))).Exists() {
			e.Msg = "field is required: an approval record has kind: Approval (this file has an id, like a Task definition; definitions belong with the others, under watch.path)"
		}
		return "", e
	}
	setPos(e, in.Name, v.Pos())
	s, err := v.String()
	got, _ := v.MarshalJSON()
	switch k := Kind(s); {
	case err != nil:
		e.Msg = "kind must be the string Approval"
	case k == KindApproval:
		return k, nil
	case k == KindTask || k == KindCampaign:
		e.Msg = fmt.Sprintf("%s makes this a definition, not an approval record: definitions belong with the others, under watch.path; an approval record has kind: Approval", got)
	case k == KindConfig:
		e.Msg = fmt.Sprintf("%s makes this a repository config, not an approval record: the config belongs at the repository root (fleetlift.yaml); an approval record has kind: Approval", got)
	default:
		e.Msg = fmt.Sprintf("unknown kind %s: an approval record has kind: Approval", got)
	}
	return "", e
}
