package local_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/jail"
	"github.com/fleetlift/fleetlift/internal/sandbox/local"
)

func TestHomeView(t *testing.T) {
	home := "/home/u"
	path := strings.Join([]string{"/home/u/.pyenv/shims", "/usr/bin", "/home/u/.local/bin", "/home/u/go/bin", "relative/bin", "/home/u", "/home/u/.pyenv/bin", "/home/uv/bin"}, ":")
	hidden, shown := local.HomeView(home, path)
	if hidden[0] != home || !slices.Contains(hidden, "/home/u/.ssh") {
		t.Errorf("hidden %q; want the home and the credential paths in it", hidden)
	}
	want := []string{"/home/u/.pyenv", "/home/u/.local/bin", "/home/u/.local/lib", "/home/u/go"}
	if !slices.Equal(shown, want) {
		t.Errorf("shown %q; want %q", shown, want)
	}
	if h, s := local.HomeView("/", path); h != nil || s != nil {
		t.Errorf("a home of / hides %q and shows %q; want nothing", h, s)
	}
}

// The work in a local sandbox sees nothing of the worker's home (no list
// of credential stores to miss: git's credentials, a vault token, shell
// history) but the toolchains its PATH reaches there, and no credential
// file inside those either. The home is made in the package directory:
// under /tmp, which every jail makes private, hiding would prove nothing.
func TestSandboxesSeeOnlyTheToolchainsOfTheHome(t *testing.T) {
	home, err := os.MkdirTemp(".", ".home-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if home, err = filepath.Abs(home); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		".vault-token":                 "secret-vault",
		".bash_history":                "secret-history",
		".config/git/credentials":      "secret-git",
		".claude/.credentials.json":    "secret-claude",
		".cargo/credentials.toml":      "secret-cargo",
		".pyenv/bin/fleetlift-toolbox": "#!/bin/sh\necho toolchain-ran\n",
		".cargo/bin/cargo-ish":         "#!/bin/sh\necho cargo-ran\n",
	}
	for rel, content := range files {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(home, ".pyenv/bin") + ":" + filepath.Join(home, ".cargo/bin") + ":/usr/bin:/bin"
	hidden, shown := local.HomeView(home, path)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	j := &jail.Jail{Self: []string{exe, "agent", "jail"}, Spec: jail.Spec{
		Writable: []string{ws}, Hidden: hidden, Readable: shown, Scratch: jail.DefaultScratch,
	}}
	cmd, err := j.Command([]string{"sh", "-c", `fleetlift-toolbox; cargo-ish; cd "$H" && ls -A; cat .vault-token .bash_history .config/git/credentials .claude/.credentials.json .cargo/credentials.toml 2>&1; true`})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + path, "H=" + home}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v (%v):\n%s", err, cmd.SetupError(), out)
	}
	got := string(out)
	for _, want := range []string{"toolchain-ran", "cargo-ran"} {
		if !strings.Contains(got, want) {
			t.Errorf("a toolchain on PATH did not run (%s):\n%s", want, got)
		}
	}
	if strings.Contains(got, "secret-") {
		t.Errorf("the work read a secret in the home:\n%s", got)
	}
}
