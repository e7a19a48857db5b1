package markdown_test

import (
	"testing"

	"github.com/fleetlift/fleetlift/internal/markdown"
)

func TestQuoting(t *testing.T) {
	cases := []struct{ name, got, want string }{
		{"code", markdown.Code("a`b"), "``a`b``"},
		{"code on one line", markdown.Code("a\nb"), "`a b`"},
		{"code starting with a backtick", markdown.Code("`x"), "`` `x ``"},
		{"fence around backticks", markdown.Fence("```\n", "diff"), "````diff\n```\n````\n"},
		{"text: a link stays text", markdown.Text("[x](http://e)"), `\[x\](http://e)`},
		{"text: html stays text", markdown.Text("<img src=x>"), "&lt;img src=x&gt;"},
		{"text: heading stays text", markdown.Text("# title"), `\# title`},
		{"text: underscore in a word", markdown.Text("awaiting_approval"), "awaiting_approval"},
		{"text: underscore emphasis", markdown.Text("_x_"), `\_x\_`},
		{"cell: a pipe ends no cell", markdown.Cell("a|b"), `a\|b`},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
}
