package approval_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
)

// unescape reads a PathName back to its target; ok is false for a hashed
// name or one that no target gives.
func unescape(name string) (target string, ok bool) {
	if name == "_" {
		return "", true
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '_' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(name) {
			return "", false
		}
		i++
		switch name[i] {
		case '_':
			b.WriteByte('/')
		case 'u':
			b.WriteByte('_')
		case 'd':
			b.WriteByte('.')
		case 'x':
			if i+2 >= len(name) {
				return "", false
			}
			v, err := hex.DecodeString(name[i+1 : i+3])
			if err != nil {
				return "", false
			}
			b.Write(v)
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), true
}

// TestPathName shows what names look like and that each reads back to
// its target.
func TestPathName(t *testing.T) {
	long := "slog-rollout/" + strings.Repeat("r", 100) + "/" + strings.Repeat("s", 100)
	cases := []struct {
		name, target, want string
	}{
		{"campaign", "slog-rollout", "slog-rollout"},
		{"repository of a campaign", "slog-rollout/payments", "slog-rollout__payments"},
		{"repository in a group", "slog-rollout/backend/api", "slog-rollout__backend__api"},
		{"task with a double dash", "a--b", "a--b"},
		{"underscore", "a/b_c", "a__b_uc"},
		{"inner dot", "a/b.c", "a__b.c"},
		{"final dot", "a/b.", "a__b_d"},
		{"two dots", "a/b..c", "a__b_d.c"},
		{"final .lock", "a/b.lock", "a__b_dlock"},
		{"leading dot", ".a", "_da"},
		{"other bytes", "a/b c@{é", "a__b_x20c_x40_x7b_xc3_xa9"},
		{"empty", "", "_"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := approval.PathName(c.target)
			if got != c.want {
				t.Errorf("PathName(%q) = %q, want %q", c.target, got, c.want)
			}
			if back, ok := unescape(got); !ok || back != c.target {
				t.Errorf("%q reads back as %q (ok %t), want %q", got, back, ok, c.target)
			}
		})
	}
	t.Run("long target", func(t *testing.T) {
		got := approval.PathName(long)
		if len(got) > 170 || !strings.HasPrefix(got, "slog-rollout__rrr") || !strings.Contains(got, "_h") {
			t.Errorf("PathName(long) = %q (%d bytes), want a prefix, _h and a hash, at most 170 bytes", got, len(got))
		}
		if other := approval.PathName(long[:len(long)-1] + "t"); other == got {
			t.Errorf("two long targets share %q", got)
		}
	})
}

// TestPathNameIsInjective names every target of up to five characters
// from the characters that matter ('/', '-', '_', '.', a letter, a byte
// outside ASCII) and finds no two that share a name, and every name
// usable as a file name and a ref component.
func TestPathNameIsInjective(t *testing.T) {
	alphabet := []string{"a", "-", "_", "/", ".", "\xe9"}
	seen := map[string]string{}
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		name := approval.PathName(prefix)
		if other, ok := seen[name]; ok {
			t.Fatalf("%q and %q share the name %q", other, prefix, name)
		}
		seen[name] = prefix
		if strings.ContainsAny(name, "/+~^:?*[\\ ") || strings.Contains(name, "..") || strings.HasPrefix(name, ".") ||
			strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock") {
			t.Fatalf("PathName(%q) = %q is no file name or ref component", prefix, name)
		}
		if depth == 5 {
			return
		}
		for _, c := range alphabet {
			walk(prefix+c, depth+1)
		}
	}
	walk("", 0)
	if len(seen) < 9000 {
		t.Fatalf("named %d targets, want every one of up to five characters", len(seen))
	}
}

// TestRecordPath: a record's file is directly under approvals/, named
// after its target (and, for a second approver, after them too).
func TestRecordPath(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"approval of a campaign", approval.RecordPath("slog-rollout"), "approvals/slog-rollout.yaml"},
		{"approval of a task in a campaign", approval.RecordPath("slog-rollout/payments"), "approvals/slog-rollout__payments.yaml"},
		{"approval of a repository in a group", approval.RecordPath("slog-rollout/backend/api"), "approvals/slog-rollout__backend__api.yaml"},
		{"second approval", approval.SecondRecordPath("slog-rollout/payments", "robin"), "approvals/slog-rollout__payments+robin.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}
