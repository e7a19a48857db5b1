package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// readmeCommand is one command of a README's command blocks: a line of a
// ```sh block (continuations joined, the comment after it dropped), or a
// "$ " line of a plain block followed by the output it shows.
type readmeCommand struct {
	file string
	line int
	args []string
	// output is what a "$ " line shows below it.
	output []string
}

func (c readmeCommand) String() string {
	return fmt.Sprintf("%s:%d: %s", c.file, c.line, strings.Join(c.args, " "))
}

// readmeCommands reads the commands of file's command blocks.
func readmeCommands(t *testing.T, file string) []readmeCommand {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []readmeCommand
	block := "" // "" outside a block, else its language ("sh", or "plain")
	var cont *readmeCommand
	var pending string
	transcript := -1 // in a plain block, the "$ " command whose output this is
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case block == "" && strings.HasPrefix(trimmed, "```"):
			switch lang := strings.TrimPrefix(trimmed, "```"); lang {
			case "sh", "bash", "shell":
				block = "sh"
			case "":
				block = "plain"
			default:
				block = lang
			}
			continue
		case block != "" && trimmed == "```":
			block, cont, transcript = "", nil, -1
			continue
		}
		switch block {
		case "sh":
			if cont == nil {
				cont = &readmeCommand{file: file, line: n}
				pending = ""
			}
			words, more := shellWords(t, cont.String(), pending+line)
			if more {
				pending += strings.TrimSuffix(strings.TrimRight(line, " "), "\\") + " "
				continue
			}
			if len(words) > 0 {
				cont.args = words
				out = append(out, *cont)
			}
			cont = nil
		case "plain":
			if cmd, ok := strings.CutPrefix(trimmed, "$ "); ok {
				words, _ := shellWords(t, file, cmd)
				out = append(out, readmeCommand{file: file, line: n, args: words})
				transcript = len(out) - 1
			} else if transcript >= 0 && trimmed != "" {
				out[transcript].output = append(out[transcript].output, trimmed)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// shellWords splits a line into words as sh would (quotes, ~/ at the start
// of a word, a comment after white space), and reports whether it ends
// with a backslash that continues it.
func shellWords(t *testing.T, where, line string) ([]string, bool) {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\' && i == len(strings.TrimRight(line, " "))-1:
			if inWord {
				words = append(words, w.String())
			}
			return words, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			i = len(line)
		case c == '~' && !inWord && strings.HasPrefix(line[i:], "~/"):
			w.WriteString(os.Getenv("HOME"))
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("%s: unterminated quote", where)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, false
}

// readmeScratch makes the campaigns repository the READMEs' commands run
// against: a copy of campaigns-template committed on main, with a branch
// my-branch that changes a campaign (checked out), at ~/src/campaigns of
// a HOME of its own.
func readmeScratch(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("FLEETLIFT_STATE_DIR", "")
	repo := filepath.Join(home, "src", "campaigns")
	if err := os.CopyFS(repo, os.DirFS("../../campaigns-template")); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q", "-b", "main")
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-qm", "campaigns from the template")
	git(t, repo, "checkout", "-q", "-b", "my-branch")
	slog := filepath.Join(repo, "campaigns", "example-slog.yaml")
	b, err := os.ReadFile(slog)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(slog, bytes.Replace(b, []byte("max_parallel: 2"), []byte("max_parallel: 3"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "commit", "-qam", "more at once")
	return repo
}

// ranAsWritten are the subcommands a README's command is run for; every
// other fleetlift command starts or changes something that needs a
// server or a forge, and is parsed as the CLI would parse it.
var ranAsWritten = []string{"validate", "plan", "version"}

// TestReadmeCommandsRunAsWritten: every command in the command blocks of
// README.md and campaigns-template/README.md works as written, in the
// directory a reader runs it in (this repository; their campaigns
// repository): validate, plan and version run, against a campaigns
// repository made from the template with a branch my-branch, with no
// Temporal server, and exit 0 (a "$ " transcript prints what it shows);
// the other fleetlift commands parse, flags and arguments; make targets
// and scripts exist; temporal's queries name fleetlift's search
// attributes. A command of another program the test does not know fails
// it: say here what to check of it.
func TestReadmeCommandsRunAsWritten(t *testing.T) {
	userGitEnv(t)
	repo := readmeScratch(t)
	t.Setenv("FLEETLIFT_TEMPORAL_ADDRESS", freeAddr(t))
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	docs := []struct{ file, dir string }{
		{"../../README.md", "../.."},
		{"../../campaigns-template/README.md", repo},
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	for _, p := range pages {
		docs = append(docs, struct{ file, dir string }{p, "../.."})
	}
	for _, doc := range docs {
		cmds := readmeCommands(t, doc.file)
		if len(cmds) < 3 && !strings.HasPrefix(doc.file, "../../docs/") {
			t.Fatalf("%s: only %d commands found", doc.file, len(cmds))
		}
		dir, err := filepath.Abs(doc.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			t.Run(fmt.Sprintf("%s:%d", strings.TrimPrefix(doc.file, "../../"), c.line), func(t *testing.T) {
				t.Chdir(dir)
				checkReadmeCommand(t, c, makefile)
			})
		}
	}
}

var envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func checkReadmeCommand(t *testing.T, c readmeCommand, makefile []byte) {
	args := c.args
	for len(args) > 0 && (args[0] == "export" || envAssignment.MatchString(args[0])) {
		if args[0] != "export" {
			// A variable for what follows; the commands here take
			// their configuration from flags and the environment.
			k, v, _ := strings.Cut(args[0], "=")
			t.Setenv(k, v)
		}
		args = args[1:]
	}
	if n := len(args); n > 0 && args[n-1] == "&" {
		// A background job.
		args = args[:n-1]
	}
	if len(args) == 0 {
		return
	}
	switch prog := args[0]; {
	case prog == "fleetlift":
		checkFleetlift(t, c, args[1:])
	case prog == "bin/fleetlift-controller":
		checkControllerFlags(t, c, args[1:])
	case prog == "kubectl":
		checkKubectl(t, c, args[1:])
	case prog == "kind":
		// Loading images into a kind cluster: not from a test.
	case prog == "make":
		for _, target := range args[1:] {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(makefile) {
				t.Errorf("%s: the Makefile has no target %s", c, target)
			}
		}
	case strings.HasPrefix(prog, "./") || strings.Contains(prog, "/") && !strings.HasPrefix(prog, "/"):
		if info, err := os.Stat(prog); err != nil || info.Mode()&0o111 == 0 {
			t.Errorf("%s: %s is not an executable script here: %v", c, prog, err)
		}
	case prog == "temporal":
		names := workflow.SearchAttributeNames()
		for _, a := range args {
			for _, name := range regexp.MustCompile(`\bFleetlift[A-Za-z]+`).FindAllString(a, -1) {
				if !slices.Contains(names, name) {
					t.Errorf("%s: the runs carry no search attribute %s", c, name)
				}
			}
		}
	case prog == "curl" || prog == "tar" || prog == "mkdir":
		// Downloading a release: not from a test.
	default:
		t.Errorf("%s: a command of %s, which this test does not know how to check", c, prog)
	}
}

// checkFleetlift runs (validate, plan, version) or parses a fleetlift
// command line.
func checkFleetlift(t *testing.T, c readmeCommand, args []string) {
	t.Helper()
	root := newRootCmd(io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Fatalf("%s: no such command: %v", c, err)
	}
	if slices.Contains(ranAsWritten, cmd.Name()) {
		out, code := runCLI(t, args...)
		// A transcript shows what happens, a failure included; a
		// command to run must work.
		if len(c.output) == 0 && code != 0 && !(code == 2 && slices.Contains(args, "--detailed-exitcode")) {
			t.Fatalf("%s: exit %d:\n%s", c, code, out)
		}
		for _, want := range c.output {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the README shows %q, the command prints:\n%s", c, want, out)
			}
		}
		return
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
}

// checkControllerFlags checks that fleetlift-controller, a main package of
// its own that this test cannot call, defines every flag a command line
// gives it.
func checkControllerFlags(t *testing.T, c readmeCommand, args []string) {
	t.Helper()
	files, err := filepath.Glob("cmd/fleetlift-controller/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: the controller's sources: %v", c, err)
	}
	var src []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if !bytes.Contains(src, []byte(`"`+name+`"`)) {
			t.Errorf("%s: fleetlift-controller has no flag --%s", c, name)
		}
	}
}

// checkKubectl checks what a kubectl command line takes from this
// repository: the manifests it applies, the namespaces and the service
// accounts deploy/base/kubernetes makes.
func checkKubectl(t *testing.T, c readmeCommand, args []string) {
	t.Helper()
	read := func(glob string) string {
		files, _ := filepath.Glob(glob)
		var b strings.Builder
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
		return b.String()
	}
	for i := 0; i+1 < len(args); i++ {
		switch v := args[i+1]; args[i] {
		case "-k", "-f":
			if _, err := os.Stat(v); err != nil {
				t.Errorf("%s: %s %s: %v", c, args[i], v, err)
			}
			if args[i] == "-k" {
				if _, err := os.Stat(filepath.Join(v, "kustomization.yaml")); err != nil {
					t.Errorf("%s: %s has no kustomization.yaml", c, v)
				}
			}
		case "-n":
			if !strings.Contains(read("deploy/base/kubernetes/namespaces.yaml"), "name: "+v+"\n") {
				t.Errorf("%s: deploy/base/kubernetes makes no namespace %s", c, v)
			}
		case "token":
			if i == 0 || args[i-1] != "create" {
				continue
			}
			found := false
			for _, doc := range strings.Split(read("deploy/base/kubernetes/rbac/*.yaml"), "\n---") {
				if strings.Contains(doc, "\nkind: ServiceAccount\n") && strings.Contains(doc, "\n  name: "+v+"\n") {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: deploy/base/kubernetes makes no service account %s", c, v)
			}
		}
	}
}
