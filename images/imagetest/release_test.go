package imagetest

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/ocitest"
)

// The release's images as make dist makes them (build/images.sh), for
// this machine's platform (the release adds linux/arm64 under QEMU, which
// this suite does not install): each image is an OCI layout whose
// index.json is the image's index, images.txt names it by that index's
// digest, and pushed with crane push --index, as the release workflow
// pushes it, a registry serves it under the same digest; the image pulled
// from there by digest runs and says the release; the deploy archive
// pins the three images and the controller's allowed sandbox image to
// those digests.
func TestReleaseImagesArePinnedByDigest(t *testing.T) {
	requireImages(t)
	crane := ocitest.Crane(t, "../..")
	const version = "v0.0.0-imagetest"
	const registry = "registry.example.com/fleetlift"
	dist := t.TempDir()
	cmd := exec.Command("../../build/images.sh", version)
	cmd.Env = append(os.Environ(), "CRANE="+crane, "DIST="+dist, "REGISTRY="+registry, "PLATFORMS=linux/"+runtime.GOARCH)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build/images.sh: %v\n%s", err, out)
	}
	t.Logf("build/images.sh %s for linux/%s took %s", version, runtime.GOARCH, time.Since(start).Round(time.Second))

	refs := readLines(t, filepath.Join(dist, "images.txt"))
	pinned := regexp.MustCompile(`^` + regexp.QuoteMeta(registry) + `/(fleetlift|agent|sandbox):` + regexp.QuoteMeta(version) + `@(sha256:[0-9a-f]{64})$`)
	digests := map[string]string{}
	for _, ref := range refs {
		m := pinned.FindStringSubmatch(ref)
		if m == nil {
			t.Fatalf("images.txt names %q, want %s/IMAGE:%s@sha256:DIGEST", ref, registry, version)
		}
		digests[m[1]] = m[2]
	}
	if len(digests) != 3 {
		t.Fatalf("images.txt names %q, want fleetlift, agent and sandbox once each", refs)
	}

	local := ocitest.Registry(t, crane)

	for name, digest := range digests {
		layout := filepath.Join(dist, "images", name)
		index, err := os.ReadFile(filepath.Join(layout, "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(index)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
			t.Errorf("%s: the layout's index.json is %s, images.txt pins %s", name, got, digest)
		}
		var idx struct {
			MediaType string `json:"mediaType"`
			Manifests []struct {
				Platform struct{ OS, Architecture string } `json:"platform"`
			} `json:"manifests"`
		}
		if err := json.Unmarshal(index, &idx); err != nil {
			t.Fatal(err)
		}
		if idx.MediaType != "application/vnd.oci.image.index.v1+json" || len(idx.Manifests) != 1 ||
			idx.Manifests[0].Platform.OS != "linux" || idx.Manifests[0].Platform.Architecture != runtime.GOARCH {
			t.Errorf("%s: the index is %s", name, index)
		}
		repo := local + "/fleetlift/" + name
		if out, err := exec.Command(crane, "push", "--index", layout, repo+":"+version).CombinedOutput(); err != nil {
			t.Fatalf("crane push --index %s: %v\n%s", layout, err, out)
		}
		got, err := exec.Command(crane, "digest", repo+":"+version).Output()
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(got)) != digest {
			t.Errorf("%s: the registry serves %s:%s as %s, the deploy manifests pin %s", name, repo, version, got, digest)
		}
	}
	// The engine pulls the agent image by its pinned digest from the
	// registry on loopback (which Docker allows without TLS), and it says
	// the release.
	ref := local + "/fleetlift/agent@" + digests["agent"]
	if _, err := docker("pull", "-q", ref); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docker("image", "rm", ref) })
	said, err := docker("run", "--rm", "--network", "none", "--label", label, ref, "--version")
	if err != nil || !strings.Contains(said, version) {
		t.Errorf("the released agent image says %q (%v), want its release %s", said, err, version)
	}

	// The deploy archive, checked by images.sha256.
	check := exec.Command("sha256sum", "-c", "images.sha256")
	check.Dir = dist
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c images.sha256: %v\n%s", err, out)
	}
	files := untar(t, filepath.Join(dist, "fleetlift_"+version+"_deploy.tar.gz"))
	prefix := "fleetlift_" + version + "_deploy/"
	component := files[prefix+"components/images/kustomization.yaml"]
	for name, digest := range digests {
		want := "  - name: fleetlift/" + name + "\n    newName: " + registry + "/" + name + "\n    digest: " + digest + "\n"
		if !strings.Contains(component, want) {
			t.Errorf("the deploy archive's components/images does not pin %s:\n%s", name, component)
		}
	}
	if base := files[prefix+"base/kustomization.yaml"]; !strings.Contains(base, "- FLEETLIFT_ALLOWED_IMAGES="+registry+"/sandbox@"+digests["sandbox"]+"\n") {
		t.Errorf("the deploy archive's base does not allow exactly the released sandbox image:\n%s", base)
	}
	for _, want := range []string{"overlays/production/kustomization.yaml", "overlays/standalone/kustomization.yaml", "crds/kustomization.yaml", "gitops/argocd/application.yaml", "gitops/flux/fleetlift.yaml", "components/seccomp/kustomization.yaml", "README.md"} {
		if _, ok := files[prefix+want]; !ok {
			t.Errorf("the deploy archive lacks %s", want)
		}
	}
	for f := range files {
		if strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "/go.mod") {
			t.Errorf("the deploy archive holds %s, a file of deploy/'s tests", f)
		}
	}
}

// readLines is a file's non-empty lines.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// untar is a .tar.gz's regular files, by name.
func untar(t *testing.T, path string) map[string]string {
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
	files := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "./")] = string(b)
		}
	}
}
