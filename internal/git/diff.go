package git

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DefaultMaxLines is the per-file patch limit when DiffOptions.MaxLines is 0.
const DefaultMaxLines = 1000

// maxLineBytes cuts very long patch lines (minified files).
const maxLineBytes = 4096

// FileDiff is one changed path.
type FileDiff struct {
	Path string
	// OldPath is the previous path of a renamed file.
	OldPath string
	// Status is added, modified, deleted or renamed (a file that became
	// a symbolic link, or the reverse, is modified).
	Status    string
	Additions int
	Deletions int
	Binary    bool
	// Patch is the unified diff, cut at MaxLines lines.
	Patch     string
	Truncated bool
}

// DiffOptions describe a diff.
type DiffOptions struct {
	// Base is the revision compared against; empty means HEAD, or the
	// empty tree when there is no commit yet.
	Base string
	// MaxLines cuts each file's patch; 0 means DefaultMaxLines.
	MaxLines int
}

// Diff stages the work tree (see Stage) and describes how it differs from
// o.Base, one FileDiff per path, in git's order. Symbolic links appear as
// links (their target path is the content); what they point at is never
// read.
func (g *Git) Diff(ctx context.Context, dir string, o DiffOptions) ([]FileDiff, error) {
	c, err := g.Changes(ctx, dir, o)
	return c.Files, err
}

// Changes is what Changes found: the files, and the tree the work tree
// amounted to when they were read.
type Changes struct {
	// Tree is the id of the staged tree the files describe: committing it
	// (see CommitTree) records exactly the changes shown, whatever
	// happens in the work tree afterwards.
	Tree  string
	Files []FileDiff
}

// Changes is Diff that also returns the tree it described.
func (g *Git) Changes(ctx context.Context, dir string, o DiffOptions) (Changes, error) {
	w, err := g.worktree(ctx, dir)
	if err != nil {
		return Changes{}, err
	}
	if err := w.stage(ctx); err != nil {
		return Changes{}, err
	}
	tree, err := w.writeTree(ctx)
	if err != nil {
		return Changes{}, fmt.Errorf("record staged tree: %w", err)
	}
	c := Changes{Tree: tree}
	base, err := g.diffBase(ctx, dir, o.Base)
	if err != nil {
		return Changes{}, err
	}
	maxLines := o.MaxLines
	if maxLines <= 0 {
		maxLines = DefaultMaxLines
	}
	// One diff of the staged tree (what a commit records) gives the list
	// of changed files (--raw) and then their patch, read in one pass:
	// each file's part, and its line counts (what --numstat would say,
	// counted on the whole part, not only on what is kept).
	var files []FileDiff
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		var err error
		files, err = readDiff(bufio.NewReaderSize(pr, 64*1024), maxLines)
		pr.CloseWithError(err)
		done <- err
	}()
	args := []string{"diff", "--no-ext-diff", "--no-textconv", "--no-color", "--find-renames", "--ignore-submodules=none", "--raw", "--patch", "-z", base, c.Tree, "--"}
	_, runErr := w.run(ctx, invocation{args: args, stdout: pw})
	pw.Close()
	readErr := <-done
	if runErr != nil {
		return Changes{}, fmt.Errorf("diff: %w", runErr)
	}
	if readErr != nil {
		return Changes{}, fmt.Errorf("read diff: %w", readErr)
	}
	c.Files = files
	return c, nil
}

// readDiff reads what git diff --raw --patch -z writes: the changed
// files, then their patches, each cut at maxLines lines.
func readDiff(br *bufio.Reader, maxLines int) ([]FileDiff, error) {
	files, sections, err := readRaw(br)
	if err == nil && len(files) > 0 {
		err = splitPatch(br, files, sections, maxLines)
	}
	return files, err
}

func (g *Git) diffBase(ctx context.Context, dir, base string) (string, error) {
	if IsObjectID(base) {
		// git diff fails on its own when the id names no commit here.
		return base, nil
	}
	if base != "" {
		return g.RevParse(ctx, dir, base)
	}
	if id, err := g.RevParse(ctx, dir, "HEAD"); err == nil {
		return id, nil
	}
	out, err := g.RunInput(ctx, dir, strings.NewReader(""), "hash-object", "-t", "tree", "--stdin")
	if err != nil {
		return "", fmt.Errorf("empty tree: %w", err)
	}
	return strings.TrimSpace(out), nil
}

func statusName(code string) string {
	switch code[0] {
	case 'A':
		return "added"
	case 'D':
		return "deleted"
	case 'R':
		return "renamed"
	case 'C':
		return "added"
	default:
		return "modified"
	}
}

// readRaw reads the --raw -z part of a diff: one record per file,
// ":<modes> <ids> <status>\0<path>\0" (a rename or copy has two paths),
// ended by an empty record when a patch follows. sections is how many
// "diff --git" parts each file has in the patch: a type change (file to
// symbolic link) is shown as a deletion and an addition.
func readRaw(br *bufio.Reader) (files []FileDiff, sections []int, err error) {
	field := func() (string, error) {
		f, err := br.ReadString(0)
		if err != nil {
			if err == io.EOF {
				err = errors.New("truncated list of changed files")
			}
			return "", err
		}
		return f[:len(f)-1], nil
	}
	for {
		meta, err := br.ReadString(0)
		if err == io.EOF && meta == "" {
			return files, sections, nil // no patch follows
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read changed files: %w", err)
		}
		meta = meta[:len(meta)-1]
		if meta == "" {
			return files, sections, nil // the patch follows
		}
		i := strings.LastIndexByte(meta, ' ')
		if meta[0] != ':' || i < 0 || i == len(meta)-1 {
			return nil, nil, fmt.Errorf("read changed files: unexpected %q", meta)
		}
		code := meta[i+1:]
		f := FileDiff{Status: statusName(code)}
		if f.Path, err = field(); err != nil {
			return nil, nil, fmt.Errorf("read changed files: %w", err)
		}
		if code[0] == 'R' || code[0] == 'C' {
			f.OldPath = f.Path
			if f.Path, err = field(); err != nil {
				return nil, nil, fmt.Errorf("read changed files: %w", err)
			}
		}
		files = append(files, f)
		if code[0] == 'T' {
			sections = append(sections, 2)
		} else {
			sections = append(sections, 1)
		}
	}
}

// splitPatch reads a multi-file patch and stores each file's part, cut at
// maxLines lines, in files (same order as the patch; file i has
// sections[i] "diff --git" parts), with its added and deleted lines and
// whether git found it binary.
func splitPatch(r io.Reader, files []FileDiff, sections []int, maxLines int) error {
	br := bufio.NewReaderSize(r, 64*1024)
	idx := -1
	left := 0 // "diff --git" parts still to come for files[idx]
	var b strings.Builder
	lines := 0
	// hunk is set from a part's first "@@" line: before it come headers
	// ("--- a/x", "+++ b/x", "Binary files ... differ"), after it only
	// lines of content, each starting with ' ', '+', '-' or a backslash.
	hunk := false
	flush := func() {
		if idx >= 0 && idx < len(files) {
			files[idx].Patch = b.String()
		}
		b.Reset()
		lines = 0
	}
	for {
		line, cut, err := readLine(br)
		if len(line) > 0 || err == nil {
			if strings.HasPrefix(line, "diff --git ") {
				hunk = false
				if left > 0 {
					left--
				} else {
					flush()
					idx++
					if idx < len(sections) {
						left = sections[idx] - 1
					}
				}
			}
			if idx >= 0 && idx < len(files) {
				f := &files[idx]
				switch {
				case strings.HasPrefix(line, "@@"):
					hunk = true
				case hunk && line != "" && line[0] == '+':
					f.Additions++
				case hunk && line != "" && line[0] == '-':
					f.Deletions++
				case !hunk && strings.HasPrefix(line, "Binary files ") || line == "GIT binary patch\n":
					f.Binary = true
				}
				if lines < maxLines {
					b.WriteString(line)
					if cut {
						b.WriteString("...\n")
						f.Truncated = true
					}
					lines++
				} else {
					f.Truncated = true
				}
			}
		}
		if err == io.EOF {
			flush()
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line including its newline, keeping at most
// maxLineBytes of it; cut reports a shortened line.
func readLine(br *bufio.Reader) (line string, cut bool, err error) {
	var b []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(b) < maxLineBytes {
			room := maxLineBytes - len(b)
			if len(chunk) > room {
				b = append(b, chunk[:room]...)
				cut = true
			} else {
				b = append(b, chunk...)
			}
		} else if len(chunk) > 0 {
			cut = true
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if cut && len(b) > 0 && b[len(b)-1] == '\n' {
			b = b[:len(b)-1]
		}
		return string(b), cut, err
	}
}
