package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
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
// command builds tinyMain, in a module of fleetlift's path with the
// same commands, for this machine instead, which prints the
// version the linker was given and the platform and cgo setting it was
// asked for; it is a Go binary all the same, whose modules the SBOM tool
// reads. Other go commands are the real one's.
const fakeGo = `#!/bin/sh
if [ "$1" != build ]; then exec "$REAL_GO" "$@"; fi
out= ldflags= pkg=
while [ $# -gt 0 ]; do
	case $1 in
	-o) out=$2; shift ;;
	-ldflags) ldflags=$2; shift ;;
	-*) ;;
	*) pkg=$1 ;;
	esac
	shift
done
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$TINY_MAIN" && GOOS= GOARCH= CGO_ENABLED=0 exec "$REAL_GO" build -trimpath -buildvcs=false \
	-ldflags "$ldflags -X 'main.target=$GOOS/$GOARCH cgo=$CGO_ENABLED'" -o "$out" "$pkg"
`

// tinyMain is the program fakeGo builds.
const tinyMain = `package main

import "fmt"

var version, commit, date, target string

func main() { fmt.Printf("fleetlift %s (%s)\n", version, target) }
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
	// The release is of a commit.
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=r", "-c", "user.email=r@example.com", "commit", "-q", "-m", "release"}} {
		if out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	commit, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	goBin, tiny := filepath.Join(t.TempDir(), "go"), t.TempDir()
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tiny, "go.mod"), []byte("module github.com/fleetlift/fleetlift\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"fleetlift", "fleetlift-agent", "fleetlift-jail"} {
		if err := os.MkdirAll(filepath.Join(tiny, "cmd", c), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tiny, "cmd", c, "main.go"), []byte(tinyMain), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	sbomTool, err := filepath.Abs("../../bin/cyclonedx-gomod")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sbomTool); err != nil {
		t.Fatalf("the SBOM tool make dist runs is not installed (make bin/cyclonedx-gomod): %v", err)
	}
	release := func() []byte {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "build/release.sh"), "v1.2.3")
		cmd.Env = append(os.Environ(), "FLEETLIFT_ROOT="+root, "GO="+goBin, "REAL_GO="+realGo, "TINY_MAIN="+tiny, "CYCLONEDX_GOMOD="+sbomTool)
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
	var want []string
	for _, p := range []string{"darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64"} {
		want = append(want, "fleetlift_v1.2.3_"+p+".tar.gz")
		cmds := []string{"fleetlift", "fleetlift-agent"}
		if strings.HasPrefix(p, "linux") {
			cmds = append(cmds, "fleetlift-jail")
		}
		for _, c := range cmds {
			want = append(want, "fleetlift_v1.2.3_"+p+"."+c+".cdx.json")
		}
	}
	slices.Sort(want)
	listed := checksumNames(t, sums)
	if !slices.Equal(listed, want) {
		t.Fatalf("dist/checksums.txt names %q, want %q:\n%s", listed, want, sums)
	}
	checkSBOMs(t, filepath.Join(root, "dist"), want)
	checkProvenance(t, filepath.Join(root, "dist/provenance.intoto.json"), sums, strings.TrimSpace(string(commit)))
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
	// On macOS there is no jail: local sandboxes run without isolation
	// there, or in Docker.
	var darwinFiles []string
	for _, f := range wantFiles {
		if !strings.HasSuffix(f, "/fleetlift-jail") {
			darwinFiles = append(darwinFiles, strings.Replace(f, "linux_arm64", "darwin_arm64", 1))
		}
	}
	if got := archiveFiles(t, filepath.Join(root, "dist/fleetlift_v1.2.3_darwin_arm64.tar.gz")); !slices.Equal(got, slices.Sorted(slices.Values(darwinFiles))) {
		t.Errorf("the darwin arm64 archive holds %q, want %q", got, darwinFiles)
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

// checksumNames are the files a checksums.txt names, sorted.
func checksumNames(t *testing.T, sums []byte) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(strings.TrimSuffix(string(sums), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(sum) {
			t.Fatalf("checksums.txt line %q", line)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// checkSBOMs checks that each SBOM among files in dir is CycloneDX for
// its binary of release v1.2.3, built for its platform.
func checkSBOMs(t *testing.T, dir string, files []string) {
	t.Helper()
	for _, f := range files {
		rest, ok := strings.CutSuffix(f, ".cdx.json")
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		var bom struct {
			BOMFormat string `json:"bomFormat"`
			Metadata  struct {
				Timestamp string `json:"timestamp"`
				Component struct {
					Name, Version, Purl string
				} `json:"component"`
			} `json:"metadata"`
			SerialNumber string `json:"serialNumber"`
		}
		if err := json.Unmarshal(b, &bom); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		platform, cmd, _ := strings.Cut(strings.TrimPrefix(rest, "fleetlift_v1.2.3_"), ".")
		goos, goarch, _ := strings.Cut(platform, "_")
		c := bom.Metadata.Component
		if bom.BOMFormat != "CycloneDX" || c.Name != "github.com/fleetlift/fleetlift" || c.Version != "v1.2.3" ||
			!strings.Contains(c.Purl, "goarch="+goarch) || !strings.Contains(c.Purl, "goos="+goos) || !strings.HasSuffix(c.Purl, "#cmd/"+cmd) {
			t.Errorf("%s: format %q, component %+v", f, bom.BOMFormat, c)
		}
		if bom.SerialNumber != "" || bom.Metadata.Timestamp != "" {
			t.Errorf("%s changes from build to build: serial %q, timestamp %q", f, bom.SerialNumber, bom.Metadata.Timestamp)
		}
	}
}

// checkProvenance checks that the provenance is an in-toto statement of
// SLSA provenance for exactly the files of checksums.txt, built from
// commit.
func checkProvenance(t *testing.T, path string, sums []byte, commit string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Type    string `json:"_type"`
		Subject []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		PredicateType string `json:"predicateType"`
		Predicate     struct {
			BuildDefinition struct {
				ExternalParameters struct {
					Version string `json:"version"`
				} `json:"externalParameters"`
				ResolvedDependencies []struct {
					URI    string            `json:"uri"`
					Digest map[string]string `json:"digest"`
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("provenance: %v\n%s", err, b)
	}
	var subjects []string
	for _, s := range st.Subject {
		subjects = append(subjects, s.Digest["sha256"]+"  "+s.Name+"\n")
	}
	if got := strings.Join(subjects, ""); got != string(sums) {
		t.Errorf("the provenance's subjects:\n%s\nwant those of checksums.txt:\n%s", got, sums)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://slsa.dev/provenance/v1" ||
		st.Predicate.BuildDefinition.ExternalParameters.Version != "v1.2.3" {
		t.Errorf("provenance: %s", b)
	}
	deps := st.Predicate.BuildDefinition.ResolvedDependencies
	if len(deps) == 0 || deps[0].Digest["gitCommit"] != commit {
		t.Errorf("the provenance's source is %+v, want commit %s", deps, commit)
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
