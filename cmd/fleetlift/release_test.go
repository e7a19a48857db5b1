package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeGo stands in for the go command in release.sh: "building" a
// command writes a script that prints the version the linker was given,
// and how it was built.
const fakeGo = `#!/bin/sh
out= ver=
while [ $# -gt 0 ]; do
	case $1 in
	-o) out=$2; shift ;;
	-ldflags) ver=$(printf '%s' "$2" | sed -n 's/.*-X main.version=\([^ ]*\).*/\1/p'); shift ;;
	esac
	shift
done
printf '#!/bin/sh\necho "fleetlift %s (%s/%s cgo=%s)"\n' "$ver" "$GOOS" "$GOARCH" "$CGO_ENABLED" >"$out"
chmod +x "$out"
`

// copyInto copies the repository's files (paths relative to its root)
// into dir, keeping their paths and modes.
func copyInto(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		info, err := os.Stat(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, info.Mode()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReleaseInstallsThroughTheSetupAction: make dist's release.sh packs
// each architecture's binaries, schemas and README into reproducible
// archives and records their checksums beside the setup-fleetlift action;
// the action's script installs the archive for this machine from the
// release (here on loopback), runs the fleetlift it installed, reuses
// the archive from the cache without downloading it again, and refuses
// an archive whose checksum is not the one recorded.
func TestReleaseInstallsThroughTheSetupAction(t *testing.T) {
	root := t.TempDir()
	schemaFiles, err := filepath.Glob("../../schemas/*.schema.json")
	if err != nil || len(schemaFiles) == 0 {
		t.Fatalf("no schema files: %v", err)
	}
	files := []string{"build/release.sh", "README.md", "schemas/fleetlift.cue",
		".github/actions/setup-fleetlift/install.sh", ".github/actions/setup-fleetlift/action.yml", ".github/actions/setup-fleetlift/checksums.txt"}
	for _, f := range schemaFiles {
		files = append(files, "schemas/"+filepath.Base(f))
	}
	docFiles, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docFiles) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	for _, f := range docFiles {
		files = append(files, "docs/"+filepath.Base(f))
	}
	copyInto(t, root, files...)
	goBin := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	release := func() []byte {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "build/release.sh"), "v1.2.3")
		cmd.Env = append(os.Environ(), "FLEETLIFT_ROOT="+root, "GO="+goBin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("release.sh: %v\n%s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(root, "dist/checksums.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sums := release()
	if again := release(); string(again) != string(sums) {
		t.Errorf("two builds of the same release differ:\n%s\n%s", sums, again)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}  fleetlift_v1\.2\.3_linux_amd64\.tar\.gz\n[0-9a-f]{64}  fleetlift_v1\.2\.3_linux_arm64\.tar\.gz\n$`).Match(sums) {
		t.Fatalf("dist/checksums.txt:\n%s", sums)
	}
	recorded, err := os.ReadFile(filepath.Join(root, ".github/actions/setup-fleetlift/checksums.txt"))
	if err != nil || !strings.HasSuffix(string(recorded), string(sums)) {
		t.Fatalf("the action's checksums.txt does not record the release (%v):\n%s", err, recorded)
	}
	wantFiles := []string{"fleetlift_v1.2.3_linux_arm64/README.md", "fleetlift_v1.2.3_linux_arm64/fleetlift", "fleetlift_v1.2.3_linux_arm64/fleetlift-agent", "fleetlift_v1.2.3_linux_arm64/fleetlift-jail", "fleetlift_v1.2.3_linux_arm64/schemas/fleetlift.cue"}
	for _, f := range schemaFiles {
		wantFiles = append(wantFiles, "fleetlift_v1.2.3_linux_arm64/schemas/"+filepath.Base(f))
	}
	for _, f := range docFiles {
		wantFiles = append(wantFiles, "fleetlift_v1.2.3_linux_arm64/docs/"+filepath.Base(f))
	}
	if got := archiveFiles(t, filepath.Join(root, "dist/fleetlift_v1.2.3_linux_arm64.tar.gz")); !slices.Equal(got, slices.Sorted(slices.Values(wantFiles))) {
		t.Errorf("the arm64 archive holds %q, want %q", got, wantFiles)
	}

	var downloads atomic.Int32
	files2 := http.FileServer(http.Dir(filepath.Join(root, "dist")))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downloads.Add(1)
		// The release is served at /v1.2.3/<archive>, as GitHub serves
		// releases/download/v1.2.3/<archive>.
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1.2.3/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		r.URL.Path = "/" + rest
		files2.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cache, work := t.TempDir(), t.TempDir()
	ghPath, ghOutput := filepath.Join(work, "path"), filepath.Join(work, "output")
	install := func(step string) (string, error) {
		cmd := exec.Command(filepath.Join(root, ".github/actions/setup-fleetlift/install.sh"), step)
		cmd.Env = append(os.Environ(), "FLEETLIFT_RELEASES="+srv.URL, "RUNNER_TOOL_CACHE="+cache, "GITHUB_PATH="+ghPath, "GITHUB_OUTPUT="+ghOutput)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := install("resolve"); err != nil {
		t.Fatalf("resolve: %v\n%s", err, out)
	}
	archive := filepath.Join(cache, "fleetlift/v1.2.3/fleetlift_v1.2.3_linux_amd64.tar.gz")
	if out, _ := os.ReadFile(ghOutput); !strings.Contains(string(out), "version=v1.2.3\n") || !strings.Contains(string(out), "archive="+archive+"\n") {
		t.Fatalf("resolve's outputs:\n%s", out)
	}
	out, err := install("install")
	if err != nil || !strings.Contains(out, "fleetlift v1.2.3 (linux/amd64 cgo=0)") {
		t.Fatalf("install: %v\n%s", err, out)
	}
	paths, _ := os.ReadFile(ghPath)
	dir := strings.TrimSpace(string(paths))
	if got, err := exec.Command(filepath.Join(dir, "fleetlift")).Output(); err != nil || !strings.Contains(string(got), "v1.2.3") {
		t.Errorf("the fleetlift on PATH (%s): %v %s", dir, err, got)
	}
	if n := downloads.Load(); n != 1 {
		t.Errorf("%d downloads, want 1", n)
	}

	// The cache restored the archive: it is checked, not downloaded.
	if out, err := install("install"); err != nil {
		t.Fatalf("install from the cache: %v\n%s", err, out)
	}
	if n := downloads.Load(); n != 1 {
		t.Errorf("%d downloads after a cached install, want 1", n)
	}

	// An archive that is not the one recorded is refused, and dropped.
	if err := os.WriteFile(archive, []byte("not the release"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(ghPath, nil, 0o644)
	out, err = install("install")
	if err == nil || !strings.Contains(out, "does not have the SHA-256 checksums.txt records") {
		t.Errorf("a tampered archive: %v\n%s", err, out)
	}
	if paths, _ := os.ReadFile(ghPath); len(paths) != 0 {
		t.Errorf("a tampered archive was put on PATH: %s", paths)
	}
	if _, err := os.Stat(archive); !os.IsNotExist(err) {
		t.Errorf("the tampered archive stays in the cache: %v", err)
	}

	// The action as committed between releases records none, and says
	// how to use it.
	cmd := exec.Command("../../.github/actions/setup-fleetlift/install.sh", "resolve")
	cmd.Env = append(os.Environ(), "GITHUB_OUTPUT="+ghOutput)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "use it at a release tag") {
		t.Errorf("the action without a release: %v\n%s", err, out)
	}
}

// archiveFiles lists the regular files of a .tar.gz, sorted.
func archiveFiles(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			names = append(names, h.Name)
		}
	}
	slices.Sort(names)
	return names
}
