package approval_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/approval"
)

func TestGlob(t *testing.T) {
	cases := []struct {
		pattern string
		match   []string
		noMatch []string
	}{
		{"campaigns/payments/**",
			[]string{"campaigns/payments/slog.yaml", "campaigns/payments/a/b/c.cue", "campaigns/payments/.hidden.yaml"},
			[]string{"campaigns/payments.yaml", "campaigns/paymentsx/a.yaml", "campaigns/billing/a.yaml", "other/campaigns/payments/a.yaml"}},
		{"**",
			[]string{"a", "a/b/c.yaml", ".github/CODEOWNERS"},
			[]string{""}},
		{"**/prod.yaml",
			[]string{"prod.yaml", "campaigns/prod.yaml", "a/b/c/prod.yaml"},
			[]string{"prod.yml", "campaigns/prod.yaml/x", "campaigns/xprod.yaml"}},
		{"campaigns/**/slog.yaml",
			[]string{"campaigns/slog.yaml", "campaigns/a/slog.yaml", "campaigns/a/b/slog.yaml"},
			[]string{"slog.yaml", "campaigns/a/slog.yml", "other/a/slog.yaml"}},
		{"a/**/b/**/c",
			[]string{"a/b/c", "a/x/b/c", "a/b/y/c", "a/x/b/b/y/c", "a/b/b/c"},
			[]string{"a/c", "a/b", "b/c", "a/x/c"}},
		{"campaigns/*",
			[]string{"campaigns/a.yaml", "campaigns/b"},
			[]string{"campaigns", "campaigns/a/b.yaml"}},
		{"campaigns/*.yaml",
			[]string{"campaigns/a.yaml", "campaigns/.yaml"},
			[]string{"campaigns/a.yml", "campaigns/x/a.yaml", "campaigns/a.yaml.bak"}},
		{"campaigns/a**b.yaml", // ** inside an element is *
			[]string{"campaigns/ab.yaml", "campaigns/axxb.yaml"},
			[]string{"campaigns/a/b.yaml", "campaigns/a/x/b.yaml"}},
		{"campaigns/?.yaml",
			[]string{"campaigns/a.yaml"},
			[]string{"campaigns/ab.yaml", "campaigns/.yaml"}},
		{"campaigns/[a-c]*.yaml",
			[]string{"campaigns/alpha.yaml", "campaigns/c.yaml"},
			[]string{"campaigns/delta.yaml"}},
		{"campaigns/[^a]*.yaml",
			[]string{"campaigns/b.yaml"},
			[]string{"campaigns/a.yaml"}},
		{`campaigns/\*.yaml`,
			[]string{"campaigns/*.yaml"},
			[]string{"campaigns/a.yaml"}},
		{"campaigns/{payments,billing}/**",
			[]string{"campaigns/payments/a.yaml", "campaigns/billing/x/y.yaml"},
			[]string{"campaigns/search/a.yaml"}},
		{"{campaigns/pay/**,other/*.yaml}",
			[]string{"campaigns/pay/a.yaml", "other/x.yaml"},
			[]string{"campaigns/x.yaml", "other/x/y.yaml"}},
		{"campaigns/{a,b{1,2}}.yaml",
			[]string{"campaigns/a.yaml", "campaigns/b1.yaml", "campaigns/b2.yaml"},
			[]string{"campaigns/b.yaml", "campaigns/b3.yaml"}},
		{`campaigns/\{a,b\}.yaml`,
			[]string{"campaigns/{a,b}.yaml"},
			[]string{"campaigns/a.yaml"}},
		{"campaigns/[{]x.yaml",
			[]string{"campaigns/{x.yaml"},
			nil},
		{"/campaigns/*.yaml", // a leading slash changes nothing
			[]string{"campaigns/a.yaml"},
			nil},
		{"campaigns/payments/", // a trailing slash means everything under it
			[]string{"campaigns/payments/a.yaml", "campaigns/payments/x/y.yaml"},
			[]string{"campaigns/payments.yaml"}},
		{"campaigns/slog.yaml",
			[]string{"campaigns/slog.yaml", "./campaigns/slog.yaml", "campaigns//slog.yaml", "/campaigns/slog.yaml", "campaigns/x/../slog.yaml"},
			[]string{"campaigns/slog.yaml/x", "Campaigns/slog.yaml", "../campaigns/slog.yaml", "x/../../campaigns/slog.yaml"}},
	}
	for _, c := range cases {
		t.Run(c.pattern, func(t *testing.T) {
			g, err := approval.CompileGlob(c.pattern)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range c.match {
				if !g.Match(n) {
					t.Errorf("%q does not match %q, want a match", c.pattern, n)
				}
			}
			for _, n := range c.noMatch {
				if g.Match(n) {
					t.Errorf("%q matches %q, want none", c.pattern, n)
				}
			}
		})
	}
}

func TestGlobErrors(t *testing.T) {
	cases := []struct{ pattern, want string }{
		{"", "empty pattern"},
		{"/", "empty pattern"},
		{"a//b", `empty path element`},
		{"a/../b", `".." is not allowed`},
		{"./a", `"." is not allowed`},
		{"a/[b", "syntax error in pattern"},
		{`a/b\`, "syntax error in pattern"},
		{"a/{b,c", "unbalanced '{'"},
		{"a/b}", "unbalanced '}'"},
		{strings.Repeat("{a,b}", 9), "more than 256 alternatives"},
	}
	for _, c := range cases {
		_, err := approval.CompileGlob(c.pattern)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CompileGlob(%q) = %v, want an error containing %q", c.pattern, err, c.want)
		}
	}
}

// TestGlobManyStars: patterns full of ** against deep paths that do not
// match end at once, not after an exponential search.
func TestGlobManyStars(t *testing.T) {
	g := approval.MustCompileGlob(strings.Repeat("**/a/", 20) + "b")
	name := strings.Repeat("a/", 200) + "c"
	start := time.Now()
	if g.Match(name) {
		t.Error("want no match")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("match took %s", d)
	}
	if !g.Match(strings.Repeat("a/", 30) + "b") {
		t.Error("want a match")
	}
}
