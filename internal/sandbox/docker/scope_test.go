package docker

import (
	"strings"
	"testing"
)

func TestHostScope(t *testing.T) {
	tests := []struct{ name, host, want string }{
		{"plain", "build-01.example.com", "build-01.example.com"},
		{"other characters", "Robin's Mac", "Robin-s-Mac"},
		{"leading punctuation", "-._ci", "ci"},
		{"long", strings.Repeat("a", 40), strings.Repeat("a", 32)},
		{"nothing left", "---", DefaultScope},
		{"empty", "", DefaultScope},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := HostScope(tc.host)
			if got != tc.want {
				t.Errorf("HostScope(%q) = %q, want %q", tc.host, got, tc.want)
			}
			if !namePattern.MatchString(got) || len(got) > 32 {
				t.Errorf("HostScope(%q) = %q is no scope New accepts", tc.host, got)
			}
		})
	}
}
