package approval_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/approval"
)

// codeOwners is GitHub's documented example, trimmed, with the lines
// numbered as a reader would count them.
const codeOwners = `# Default owners for everything in the repo.
*       @global-owner1 @global-owner2

*.js    @js-owner #This is an inline comment.
*.go docs@example.com
*.txt @octo-org/octocats
/build/logs/ @doctocat
docs/* docs@example.com
apps/ @octocat
/docs/ @doctocat
/scripts/ @doctocat @octocat
**/logs @octocat
/apps/ @octocat
/apps/github
/campaigns/payments/** @payments-lead @acme/payments
campaigns/security/slog.yaml @sec-lead
`

func TestCodeOwners(t *testing.T) {
	c, err := approval.ParseCodeOwners("CODEOWNERS", []byte(codeOwners))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file   string
		owners []string
		line   int
	}{
		{"README.md", []string{"@global-owner1", "@global-owner2"}, 2},
		{"src/app.js", []string{"@js-owner"}, 4},
		{"main.go", []string{"docs@example.com"}, 5},
		{"a/b/notes.txt", []string{"@octo-org/octocats"}, 6},
		{"build/logs/x.log", []string{"@octocat"}, 12}, // **/logs comes later and wins
		{"build/logs/deep/x.log", []string{"@octocat"}, 12},
		{"docs/getting-started.md", []string{"@doctocat"}, 10},
		{"docs/build-app/troubleshooting.md", []string{"@doctocat"}, 10},
		{"x/docs/a.md", []string{"@global-owner1", "@global-owner2"}, 2}, // docs/* is anchored: x/docs is not docs
		{"scripts/run.sh", []string{"@doctocat", "@octocat"}, 11},
		{"deeply/nested/logs/a", []string{"@octocat"}, 12},
		{"deeply/nested/logs", []string{"@octocat"}, 12},
		{"apps/web/index.html", []string{"@octocat"}, 13},
		{"x/apps/y.html", []string{"@octocat"}, 9},
		{"apps/github/main.rb", nil, 14}, // a line without owners leaves the file without one
		{"campaigns/payments/slog.yaml", []string{"@payments-lead", "@acme/payments"}, 15},
		{"campaigns/security/slog.yaml", []string{"@sec-lead"}, 16},
		{"campaigns/security/slog.yml", []string{"@global-owner1", "@global-owner2"}, 2},
	}
	for _, tc := range cases {
		owners, line := c.Owners(tc.file)
		if !slices.Equal(owners, tc.owners) || line != tc.line {
			t.Errorf("Owners(%s) = %v, line %d; want %v, line %d", tc.file, owners, line, tc.owners, tc.line)
		}
	}
}

// TestCodeOwnersDirStar: "docs/*" owns the files directly in docs/ only,
// as GitHub documents; "docs/" owns everything under it.
func TestCodeOwnersDirStar(t *testing.T) {
	c, err := approval.ParseCodeOwners("CODEOWNERS", []byte("docs/* @a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := c.Owners("docs/getting-started.md"); !slices.Equal(o, []string{"@a"}) {
		t.Errorf("docs/getting-started.md: %v", o)
	}
	if o, line := c.Owners("docs/build-app/troubleshooting.md"); o != nil || line != 0 {
		t.Errorf("docs/build-app/troubleshooting.md: %v, line %d; want no owner", o, line)
	}
}

func TestCodeOwnersErrors(t *testing.T) {
	cases := []struct{ text, want string }{
		{"!*.js @a\n", "CODEOWNERS:1: pattern \"!*.js\": negation (!) is not supported"},
		{"*.js @a\n[ab].go @b\n", "CODEOWNERS:2: pattern \"[ab].go\": character ranges ([ ]) are not supported"},
		{"*.go alice\n", `CODEOWNERS:1: owner "alice": want @login, @org/team or an e-mail address`},
		{"*.go @acme/team/x\n", `owner "@acme/team/x"`},
		{"*.go @-x\n", `owner "@-x"`},
		{"a//b @x\n", "empty path element"},
		{"/ @x\n", "matches nothing"},
	}
	for _, c := range cases {
		_, err := approval.ParseCodeOwners("CODEOWNERS", []byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseCodeOwners(%q) = %v, want an error containing %q", c.text, err, c.want)
		}
	}
	_, err := approval.ParseCodeOwners("CODEOWNERS", []byte("!a @x\n*.go bob\n"))
	if err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("want both bad lines named: %v", err)
	}
}

func TestReadCodeOwners(t *testing.T) {
	cases := []struct {
		name  string
		files []string
		want  string
	}{
		{"none", nil, ""},
		{"root", []string{"CODEOWNERS"}, "CODEOWNERS"},
		{"docs", []string{"docs/CODEOWNERS"}, "docs/CODEOWNERS"},
		{".github first", []string{"CODEOWNERS", ".github/CODEOWNERS", "docs/CODEOWNERS"}, ".github/CODEOWNERS"},
		{"root before docs", []string{"CODEOWNERS", "docs/CODEOWNERS"}, "CODEOWNERS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{"fleetlift.yaml": {Data: []byte("version: 1\n")}}
			for _, f := range c.files {
				fsys[f] = &fstest.MapFile{Data: []byte("* @" + strings.NewReplacer("/", "-", ".", "").Replace(f) + "\n")}
			}
			co, err := approval.ReadCodeOwners(fsys)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if co != nil {
					t.Errorf("got %s, want none", co.File)
				}
				return
			}
			if co == nil || co.File != c.want {
				t.Fatalf("got %+v, want %s", co, c.want)
			}
			if o, _ := co.Owners("x"); len(o) != 1 {
				t.Errorf("owners of x: %v", o)
			}
		})
	}
	if _, err := approval.ReadCodeOwners(fstest.MapFS{"CODEOWNERS": {Data: []byte("!x @a\n")}}); err == nil {
		t.Error("a CODEOWNERS in error: want an error")
	}
}

func TestReadCodeOwnersSymlink(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "owners"), []byte("* @mallory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("owners", filepath.Join(dir, "CODEOWNERS")); err != nil {
		t.Fatal(err)
	}
	_, err := approval.ReadCodeOwners(os.DirFS(dir))
	if err == nil || !strings.Contains(err.Error(), "read CODEOWNERS: not a regular file") {
		t.Errorf("err = %v", err)
	}
}
