package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Dir is the directory of the campaigns repository that holds approval
// records.
const Dir = "approvals"

// RecordPath is where an approval record for target goes in the
// campaigns repository: approvals/<PathName(target)>.yaml
// ("slog-rollout/payments" goes to approvals/slog-rollout__payments.yaml).
// No two targets share a path.
func RecordPath(target string) string {
	return Dir + "/" + PathName(target) + ".yaml"
}

// SecondRecordPath is where the record of another approver of the same
// result goes when RecordPath holds one already (a change whose author
// approves counts only with a second approver):
// approvals/<target>+<by>.yaml, both named by PathName. A "+" is in no
// PathName, so no pair of target and approver shares a path, nor with a
// RecordPath.
func SecondRecordPath(target, by string) string {
	return Dir + "/" + PathName(target) + "+" + PathName(by) + ".yaml"
}

// maxPlainName bounds the part of a PathName written out in full: a
// longer target keeps its first characters and adds its SHA-256, so that
// the name stays within file-name and ref-component limits (255 bytes)
// with room for a suffix.
const maxPlainName = 120

// PathName returns a name for target that is one file name and one Git
// ref component, and that no other target shares: the approval pull
// request's branch, the summary file on it and the approval record's
// file are named after it.
//
// Letters, digits, '-' and most '.' stay as they are; everything else is
// escaped with '_' and one code letter, so the name reads back to its
// target and two targets never meet (the earlier scheme turned both
// "a/b" and "a--b" into "a--b"):
//
//	/   → __           slog-rollout/payments → slog-rollout__payments
//	_   → _u
//	.   → _d           where a bare dot is not allowed: first, last, before
//	                   another dot, or starting a final ".lock"
//	any other byte b → _x and two hex digits
//
// A target whose escaped form is longer than 120 characters is cut after
// a whole escape at most 100 characters in and followed by "_h" and the
// hex SHA-256 of the whole target: "_h" is no code of the escaped form,
// so such a name meets no escaped one, and two of them meet only if
// SHA-256 collides. The empty target is "_".
func PathName(target string) string {
	if target == "" {
		return "_"
	}
	codes := make([]string, len(target))
	n := 0
	for i := 0; i < len(target); i++ {
		codes[i] = escape(target, i)
		n += len(codes[i])
	}
	if n <= maxPlainName {
		return strings.Join(codes, "")
	}
	var b strings.Builder
	for _, c := range codes {
		if b.Len()+len(c) > 100 {
			break
		}
		b.WriteString(c)
	}
	sum := sha256.Sum256([]byte(target))
	return b.String() + "_h" + hex.EncodeToString(sum[:])
}

// escape is the code of target[i] in a PathName.
func escape(target string, i int) string {
	switch c := target[i]; {
	case c == '/':
		return "__"
	case c == '_':
		return "_u"
	case c == '.':
		if i == 0 || i == len(target)-1 || target[i+1] == '.' || target[i:] == ".lock" {
			return "_d"
		}
		return "."
	case c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9':
		return string(c)
	default:
		return fmt.Sprintf("_x%02x", c)
	}
}
