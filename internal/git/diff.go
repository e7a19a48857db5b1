package git

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
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
	w, err := g.worktree(ctx, dir)
	if err != nil {
		return nil, err
	}
	if err := w.stage(ctx); err != nil {
		return nil, err
	}
	base, err := g.diffBase(ctx, dir, o.Base)
	if err != nil {
		return nil, err
	}
	common := []string{"diff", "--cached", "--no-ext-diff", "--no-textconv", "--no-color", "--find-renames", "--ignore-submodules=none"}

	out, err := w.run(ctx, invocation{args: append(common, "--name-status", "-z", base, "--")})
	if err != nil {
		return nil, fmt.Errorf("list changed files: %w", err)
	}
	files, sections, err := parseNameStatus(out)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, nil
	}
	out, err = w.run(ctx, invocation{args: append(common, "--numstat", "-z", base, "--")})
	if err != nil {
		return nil, fmt.Errorf("count changed lines: %w", err)
	}
	if err := parseNumstat(out, files); err != nil {
		return nil, err
	}

	maxLines := o.MaxLines
	if maxLines <= 0 {
		maxLines = DefaultMaxLines
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := splitPatch(pr, files, sections, maxLines)
		pr.CloseWithError(err)
		done <- err
	}()
	_, runErr := w.run(ctx, invocation{args: append(common, "--patch", base, "--"), stdout: pw})
	pw.Close()
	splitErr := <-done
	if runErr != nil {
		return nil, fmt.Errorf("diff: %w", runErr)
	}
	if splitErr != nil {
		return nil, fmt.Errorf("read diff: %w", splitErr)
	}
	return files, nil
}

func (g *Git) diffBase(ctx context.Context, dir, base string) (string, error) {
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

// parseNameStatus reads `diff --name-status -z`. sections is how many
// "diff --git" parts each file has in the patch: a type change (file to
// symbolic link) is shown as a deletion and an addition.
func parseNameStatus(out string) (files []FileDiff, sections []int, err error) {
	fields := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	for i := 0; i < len(fields); i++ {
		code := fields[i]
		if code == "" {
			continue
		}
		f := FileDiff{Status: statusName(code)}
		if code[0] == 'R' || code[0] == 'C' {
			if i+2 >= len(fields) {
				return nil, nil, errors.New("read changed files: truncated rename")
			}
			f.OldPath, f.Path = fields[i+1], fields[i+2]
			i += 2
		} else {
			if i+1 >= len(fields) {
				return nil, nil, errors.New("read changed files: truncated entry")
			}
			f.Path = fields[i+1]
			i++
		}
		files = append(files, f)
		if code[0] == 'T' {
			sections = append(sections, 2)
		} else {
			sections = append(sections, 1)
		}
	}
	return files, sections, nil
}

// parseNumstat reads `diff --numstat -z` into files, which are in the same
// order.
func parseNumstat(out string, files []FileDiff) error {
	fields := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	n := 0
	for i := 0; i < len(fields); i++ {
		if fields[i] == "" {
			continue
		}
		parts := strings.SplitN(fields[i], "\t", 3)
		if len(parts) != 3 {
			return fmt.Errorf("read line counts: unexpected %q", fields[i])
		}
		if parts[2] == "" { // rename: old and new paths follow
			i += 2
		}
		if n >= len(files) {
			return errors.New("read line counts: more entries than files")
		}
		if parts[0] == "-" {
			files[n].Binary = true
		} else {
			files[n].Additions, _ = strconv.Atoi(parts[0])
			files[n].Deletions, _ = strconv.Atoi(parts[1])
		}
		n++
	}
	return nil
}

// splitPatch reads a multi-file patch and stores each file's part, cut at
// maxLines lines, in files (same order as the patch; file i has
// sections[i] "diff --git" parts).
func splitPatch(r io.Reader, files []FileDiff, sections []int, maxLines int) error {
	br := bufio.NewReaderSize(r, 64*1024)
	idx := -1
	left := 0 // "diff --git" parts still to come for files[idx]
	var b strings.Builder
	lines := 0
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
				if lines < maxLines {
					b.WriteString(line)
					if cut {
						b.WriteString("...\n")
						files[idx].Truncated = true
					}
					lines++
				} else {
					files[idx].Truncated = true
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
