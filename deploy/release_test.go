package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetlift/fleetlift/internal/kubetest/node"
	"github.com/fleetlift/fleetlift/internal/ocitest"
)

// release is a fleetlift release as an operator meets it: the deploy
// archive unpacked, and its images in a registry.
type release struct {
	// deploy is the unpacked deploy archive's directory.
	deploy string
	// mirror is the URL of the registry on loopback serving the images
	// as ghcr.io serves a release's.
	mirror string
	// sandbox is the sandbox image's pinned reference.
	sandbox string
	// pinned are the images' pinned references
	// (ghcr.io/fleetlift/NAME@sha256:…).
	pinned []string
}

// makeRelease makes a release as make dist does (build/images.sh, for
// this machine's platform), and pushes its images as the release
// workflow does (crane push --index), to a registry on loopback.
func makeRelease(t *testing.T, root string) release {
	t.Helper()
	crane := ocitest.Crane(t, root)
	const version = "v0.0.0-node"
	dist := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "build", "images.sh"), version)
	cmd.Env = append(os.Environ(), "FLEETLIFT_ROOT="+root, "CRANE="+crane, "DIST="+dist, "PLATFORMS=linux/"+runtime.GOARCH)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build/images.sh (needs a Docker engine; make images first): %v\n%s", err, out)
	}
	t.Logf("release %s made in %s", version, time.Since(start).Round(time.Millisecond))

	local := ocitest.Registry(t, crane)

	r := release{deploy: filepath.Join(dist, "fleetlift_"+version+"_deploy"), mirror: "http://" + local}
	b, err := os.ReadFile(filepath.Join(dist, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^ghcr\.io/fleetlift/([a-z]+):` + regexp.QuoteMeta(version) + `@(sha256:[0-9a-f]{64})$`)
	for _, ref := range strings.Fields(string(b)) {
		m := line.FindStringSubmatch(ref)
		if m == nil {
			t.Fatalf("images.txt names %q", ref)
		}
		push := exec.Command(crane, "push", "--index", filepath.Join(dist, "images", m[1]), local+"/fleetlift/"+m[1]+":"+version)
		if out, err := push.CombinedOutput(); err != nil {
			t.Fatalf("crane push --index: %v\n%s", err, out)
		}
		pinned := "ghcr.io/fleetlift/" + m[1] + "@" + m[2]
		r.pinned = append(r.pinned, pinned)
		if m[1] == "sandbox" {
			r.sandbox = pinned
		}
	}
	if len(r.pinned) != 3 || r.sandbox == "" {
		t.Fatalf("images.txt names %q, want the three images", b)
	}
	untar := exec.Command("tar", "-xzf", filepath.Join(dist, "fleetlift_"+version+"_deploy.tar.gz"), "-C", dist)
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("unpack the deploy archive: %v\n%s", err, out)
	}
	return r
}

// podImages are the images the node's pods' containers name, as
// "NAMESPACE IMAGE", once each.
func podImages(t *testing.T, n *node.Node) []string {
	t.Helper()
	var pods corev1.PodList
	if err := n.Env.Client.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	var images []string
	for _, p := range pods.Items {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			if image := p.Namespace + " " + c.Image; !slices.Contains(images, image) {
				images = append(images, image)
			}
		}
	}
	return images
}
