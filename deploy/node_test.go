package deploy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetlift/fleetlift/internal/devserver/credential"
	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/kubetest/node"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
)

// TestProductionOnARealNode installs fleetlift from its release as an
// operator does from an empty cluster (deploy/README.md): the release's
// deploy archive, whose manifests name the images on ghcr.io by digest,
// with an overlay of the operator's own over its overlays/production,
// applied the way Flux's kustomize-controller applies it, on a real
// kubelet whose pods reach the API server through the kubernetes Service
// as in any cluster. The release is make dist's (build/images.sh, for
// this machine's platform), its images served by a registry on loopback
// that the node's containerd mirrors ghcr.io to, pushed there as the
// release workflow pushes them: every image a pod runs is pulled by its
// digest. Then a campaign merged into the campaigns repository runs to
// pull requests with nothing outside the cluster but Temporal and the
// forge:
//
//   - Temporal is `fleetlift server` with mutual TLS on the host's
//     address on the pods' bridge, the workers and reconcilers holding
//     its client certificate from the Secret temporal-tls;
//   - the forge's token is the Secrets fleetlift-forge (the workers'
//     pushes and pull requests) and fleetlift-git (the reconcilers'
//     status mirror on the campaigns repository);
//   - the forge is a real Gitea serving HTTPS there, its CA given to the
//     workers and reconcilers as an operator with a private CA gives it;
//   - the seccomp component's DaemonSet installs the jail's profile on
//     the node and the jail component runs the sandbox pods in user
//     namespaces, so the agent jails the work (the overlay's isolation
//     is namespaces).
//
// The reconciler replicas clone the campaigns repository and elect a
// leader, which launches the campaign after a reviewed merge; the
// workers ask the controller for a sandbox per repository; the
// controller runs them as pods of the sandbox image on the kubelet; the
// agents clone through their worker's gateway; the workers push and
// open the pull requests; `fleetlift status` reports them.
func TestProductionOnARealNode(t *testing.T) {
	root, err := kubetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	fleetlift := filepath.Join(root, "bin", "fleetlift")
	if _, err := os.Stat(fleetlift); err != nil {
		t.Fatalf("bin/fleetlift is missing: run `make build` (%v)", err)
	}
	// The release is made before the node starts: controller-runtime's
	// logger, which envtest logs to, is set first.
	ctrllog.SetLogger(logr.Discard())
	rel := makeRelease(t, root)
	n, err := node.Start(node.Options{InCluster: true, Mirrors: map[string]string{"ghcr.io": rel.mirror}})
	if err != nil {
		t.Fatalf("start the node (run `%s` first): %v", node.MakeTarget, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pods:\n%s", podReport(n))
		}
		if err := n.Stop(); err != nil {
			t.Errorf("stop the node: %v", err)
		}
		if left := n.Leftovers(); len(left) > 0 {
			t.Errorf("the node left: %s", strings.Join(left, "; "))
		}
	})
	// A second such node is refused, and its cleanup leaves this one's
	// kube-proxy rules (the pods below reach the API server through them).
	if other, err := node.Start(node.Options{InCluster: true}); err == nil {
		other.Stop()
		t.Fatal("a second node with InCluster started beside the first")
	} else if !strings.Contains(err.Error(), "kube-proxy") {
		t.Errorf("a second node with InCluster: %v, want a refusal naming kube-proxy's tables", err)
	}
	t.Logf("node Ready: control plane %s, images %s, kubelet %s", n.Timings.ControlPlane.Round(time.Millisecond),
		n.Timings.Images.Round(time.Millisecond), n.Timings.Ready.Round(time.Millisecond))

	temporal, stateDir := startTemporal(t, fleetlift, n.HostIP)
	g, forgeCA := startForge(t, n.HostIP)
	bot := g.Admin()
	alice := g.CreateUser(t, "alice")
	var targets []string
	for _, name := range []string{"svc-a", "svc-b"} {
		targets = append(targets, pushRepo(t, g, bot, name, map[string]string{"go.mod": "module example.com/" + name + "\n\ngo 1.21\n"}))
	}
	campaigns := pushRepo(t, g, bot, "campaigns", map[string]string{
		"fleetlift.yaml":     fmt.Sprintf("version: 1\nkind: Config\nwatch: {branch: main, path: campaigns}\nforge:\n  type: gitea\n  url: %s\n", g.URL()),
		"campaigns/.gitkeep": "",
	})
	g.AddCollaborator(t, bot.Name, "campaigns", alice.Name, "write")

	overlay := operatorOverlay(t, n, rel.deploy, overlayValues{
		campaigns: campaigns, temporal: temporal, forge: g.URL(), forgeToken: bot.Token,
		forgeCA: forgeCA, temporalTLS: filepath.Join(stateDir, "tls"),
	})
	sandboxPods := n.WatchPods(t, "sandbox-isolated")
	f := newFlux(t, n.Env.Config)
	crds := f.apply(t, "fleetlift-crds", filepath.Join(rel.deploy, "crds"))
	f.wait(t, "fleetlift-crds", crds, time.Minute)
	start := time.Now()
	app := f.apply(t, "fleetlift", overlay)
	f.wait(t, "fleetlift", app, 5*time.Minute)
	t.Logf("the overlay's %d objects applied and healthy in %s", len(app.Entries), time.Since(start).Round(time.Millisecond))

	// The campaign arrives as a pull request alice reviews and bot
	// merges (the reconciler launches reviewed merges alone).
	start = time.Now()
	mergeCampaign(t, g, bot, alice, fmt.Sprintf(`version: 1
kind: Campaign
id: node-bump
title: Bump go in sandbox pods
failure: {threshold_percent: 100}
template:
  execution:
    deterministic:
      image: %s
      command: [sed, -i, "s/^go 1.21$/go 1.26/", go.mod]
  pull_request: {branch_prefix: auto/node, title: Bump go}
repositories:
  - url: %s
  - url: %s
`, rel.sandbox, targets[0], targets[1]))

	var prURLs []string
	for _, name := range []string{"svc-a", "svc-b"} {
		pr := waitPullRequest(t, g, bot, name, 6*time.Minute, sandboxPods)
		var file struct{ Content string }
		g.Do(t, bot.Token, "GET", fmt.Sprintf("repos/%s/%s/contents/go.mod?ref=%s", bot.Name, name, pr.Head.Ref), nil, &file)
		if !strings.Contains(decodeBase64(t, file.Content), "go 1.26") {
			t.Errorf("%s: pull request %d's branch %s does not raise go to 1.26", name, pr.Number, pr.Head.Ref)
		}
		prURLs = append(prURLs, fmt.Sprintf("%s%s/%s/pulls/%d", g.URL(), bot.Name, name, pr.Number))
	}
	t.Logf("merge to both pull requests open: %s", time.Since(start).Round(time.Millisecond))

	// The sandboxes ran on the node: pods of the released sandbox image,
	// in user namespaces with the installed Localhost profile. Every
	// container the node ran is of a released image, by digest (the
	// node's own pause image aside).
	if seen := sandboxPods(); !strings.Contains(seen, "jailed") || !strings.Contains(seen, rel.sandbox) {
		t.Errorf("no jailed sandbox pod of %s ran; seen: %s", rel.sandbox, seen)
	}
	for _, image := range podImages(t, n) {
		if _, ref, _ := strings.Cut(image, " "); !slices.Contains(rel.pinned, ref) {
			t.Errorf("a pod in %s ran an image other than the release's", image)
		}
	}
	// No fleetlift process met configuration it does not read (as the
	// Services' links would have made).
	if logs := containerLogs(n, "a typo?"); logs != "" {
		t.Errorf("fleetlift warned of environment variables it does not read:\n%s", logs)
	}
	status := exec.Command(fleetlift, "status", "node-bump", "--temporal-address", temporal, "--state-dir", stateDir)
	out, err := status.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("2 repositories: 2 completed")) ||
		!bytes.Contains(out, []byte(prURLs[0])) || !bytes.Contains(out, []byte(prURLs[1])) {
		t.Errorf("fleetlift status node-bump: %v; want both repositories completed with pull requests %s\n%s", err, strings.Join(prURLs, " and "), out)
	}
}

// startTemporal runs `fleetlift server` on host with a state directory of
// its own and returns its address and the state directory (tls/ holds the
// client certificate).
func startTemporal(t *testing.T, fleetlift, host string) (addr, stateDir string) {
	t.Helper()
	stateDir = t.TempDir()
	addr = net.JoinHostPort(host, freePort(t, host))
	var out syncbuf.Buffer
	cmd := exec.Command(fleetlift, "server", "--temporal-address", addr, "--state-dir", stateDir)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("fleetlift server:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "Temporal listening") {
		select {
		case <-exited:
			t.Fatalf("fleetlift server exited:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleetlift server did not listen within 2 minutes:\n%s", out.String())
		}
	}
	return addr, stateDir
}

// startForge runs Gitea serving HTTPS on host with a certificate from a CA
// of the test's, and returns it and the CA's file.
func startForge(t *testing.T, host string) (*giteatest.Server, string) {
	t.Helper()
	dir := t.TempDir()
	ca, err := kubetest.NewCA("fleetlift-test-forge-ca")
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := ca.Issue("gitea", host)
	if err != nil {
		t.Fatal(err)
	}
	tls := &giteatest.TLS{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), CAFile: filepath.Join(dir, "ca.crt")}
	for path, data := range map[string][]byte{tls.CertFile: crt, tls.KeyFile: key, tls.CAFile: ca.CertPEM()} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g, err := giteatest.Launch(giteatest.Options{Dir: filepath.Join(dir, "gitea"), Host: host, TLS: tls})
	if g != nil {
		t.Cleanup(g.Close)
	}
	if err != nil {
		t.Fatalf("gitea: %v", err)
	}
	return g, tls.CAFile
}

// pushRepo creates owner's repository name on g holding files on main and
// returns its clone URL.
func pushRepo(t *testing.T, g *giteatest.Server, u giteatest.User, name string, files map[string]string) string {
	t.Helper()
	url := g.CreateRepo(t, u.Name, name, false)
	work := t.TempDir()
	g.Git(t, u, work, "init", "-q", "-b", "main")
	for path, content := range files {
		p := filepath.Join(work, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g.Git(t, u, work, "add", ".")
	g.Git(t, u, work, "commit", "-q", "-m", "init")
	g.Git(t, u, work, "push", "-q", url, "main")
	return url
}

// mergeCampaign proposes campaigns/node-bump.yaml in a pull request on the
// campaigns repository as author, has reviewer approve it and author
// merge it.
func mergeCampaign(t *testing.T, g *giteatest.Server, author, reviewer giteatest.User, def string) {
	t.Helper()
	work := t.TempDir()
	g.Git(t, author, work, "clone", "-q", g.CloneURL(author.Name, "campaigns"), ".")
	g.Git(t, author, work, "checkout", "-q", "-b", "add-node-bump")
	if err := os.WriteFile(filepath.Join(work, "campaigns", "node-bump.yaml"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Git(t, author, work, "add", ".")
	g.Git(t, author, work, "commit", "-q", "-m", "Add node-bump")
	g.Git(t, author, work, "push", "-q", "origin", "add-node-bump")
	var pr giteaPR
	g.Do(t, author.Token, "POST", "repos/"+author.Name+"/campaigns/pulls", map[string]string{"head": "add-node-bump", "base": "main", "title": "Add node-bump"}, &pr)
	g.Do(t, reviewer.Token, "POST", fmt.Sprintf("repos/%s/campaigns/pulls/%d/reviews", author.Name, pr.Number),
		map[string]string{"event": "APPROVED", "body": "lgtm", "commit_id": pr.Head.Sha}, nil)
	g.Do(t, author.Token, "POST", fmt.Sprintf("repos/%s/campaigns/pulls/%d/merge", author.Name, pr.Number), map[string]string{"Do": "merge"}, nil)
}

// giteaPR is the part of a Gitea pull request the test reads.
type giteaPR struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	Head   struct {
		Ref string `json:"ref"`
		Sha string `json:"sha"`
	} `json:"head"`
}

// waitPullRequest waits for an open pull request from an auto/node
// branch on owner's repository; sandboxes says what ran, if none comes.
func waitPullRequest(t *testing.T, g *giteatest.Server, owner giteatest.User, repo string, timeout time.Duration, sandboxes func() string) giteaPR {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var prs []giteaPR
		g.Do(t, owner.Token, "GET", fmt.Sprintf("repos/%s/%s/pulls?state=open", owner.Name, repo), nil, &prs)
		for _, pr := range prs {
			if strings.HasPrefix(pr.Head.Ref, "auto/node") {
				return pr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no pull request after %s; sandbox pods seen: %s", repo, timeout, sandboxes())
		}
		time.Sleep(time.Second)
	}
}

// overlayValues are what the operator's overlay sets.
type overlayValues struct {
	campaigns, temporal, forge, forgeToken string
	forgeCA                                string // the forge's CA certificate file
	temporalTLS                            string // the server's tls/ directory
}

// operatorOverlay writes the overlay an operator keeps in their own
// repository over overlays/production, and returns its directory: the
// seccomp and jail components (and the images component again, for the
// seccomp installer's image); where Temporal, the campaigns repository
// and the forge are; the Secrets (an operator's come from their secret
// store); the forge's CA for the workers and reconcilers; and the
// kubelet's seccomp directory, which on this node is not the default; and
// smaller sandboxes, for a node of 2 CPUs.
func operatorOverlay(t *testing.T, n *node.Node, deploy string, v overlayValues) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(deploy, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	files := map[string]string{}
	for name, src := range map[string]string{
		"forge-ca.crt": v.forgeCA,
		"tls.crt":      filepath.Join(v.temporalTLS, credential.ClientCertFile),
		"tls.key":      filepath.Join(v.temporalTLS, credential.ClientKeyFile),
		"ca.crt":       filepath.Join(v.temporalTLS, credential.CAFile),
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	origin := strings.TrimSuffix(v.forge, "/")
	webhook := make([]byte, 16)
	rand.Read(webhook)
	files["kustomization.yaml"] = fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %[1]s
components:
  - %[2]s
  - %[3]s
  - %[4]s
configMapGenerator:
  - name: fleetlift-config
    namespace: fleetlift-system
    behavior: merge
    literals:
      - FLEETLIFT_REPO=%[5]s
      - FLEETLIFT_TEMPORAL_ADDRESS=%[6]s
      - FLEETLIFT_NAMESPACE=default
      - FLEETLIFT_FORGE_TYPE=gitea
      - FLEETLIFT_FORGE_URL=%[7]s
      - FLEETLIFT_GIT_TOKEN_ORIGINS=%[8]s
  - name: forge-ca
    namespace: fleetlift-system
    files:
      - ca.crt=forge-ca.crt
secretGenerator:
  - name: temporal-tls
    namespace: fleetlift-system
    files: [tls.crt, tls.key, ca.crt]
    options: {disableNameSuffixHash: true}
  - name: fleetlift-forge
    namespace: fleetlift-system
    literals: [token=%[9]s]
    options: {disableNameSuffixHash: true}
  - name: fleetlift-git
    namespace: fleetlift-system
    literals: [token=%[9]s]
    options: {disableNameSuffixHash: true}
  - name: fleetlift-webhook
    namespace: fleetlift-system
    literals: [secret=%[10]s]
    options: {disableNameSuffixHash: true}
patches:
  - target:
      kind: Deployment
      labelSelector: app.kubernetes.io/component in (reconciler,worker)
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: SSL_CERT_FILE, value: /etc/fleetlift/forge-ca/ca.crt}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: GIT_SSL_CAINFO, value: /etc/fleetlift/forge-ca/ca.crt}
      - op: add
        path: /spec/template/spec/containers/0/volumeMounts/-
        value: {name: forge-ca, mountPath: /etc/fleetlift/forge-ca, readOnly: true}
      - op: add
        path: /spec/template/spec/volumes/-
        value: {name: forge-ca, configMap: {name: forge-ca}}
  # The node has 2 CPUs, where the controller's default limit for a
  # sandbox is 2: sandboxes get a quarter of one.
  - target:
      kind: Deployment
      name: fleetlift-controller
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --default-cpu=250m
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --default-memory=512Mi
  - target:
      kind: DaemonSet
      name: fleetlift-seccomp
    patch: |
      - op: replace
        path: /spec/template/spec/volumes/1/hostPath/path
        value: %[11]s
`, rel("overlays/production"), rel("components/seccomp"), rel("components/jail"), rel("components/images"),
		v.campaigns, v.temporal, v.forge, origin, v.forgeToken, hex.EncodeToString(webhook),
		filepath.Join(n.Dir, "kubelet", "seccomp"))
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// podReport describes every pod on the node and the end of each
// container's log, for a failed test.
func podReport(n *node.Node) string {
	var pods corev1.PodList
	if err := n.Env.Client.List(context.Background(), &pods); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		b.WriteString(node.DescribePod(p) + "\n")
	}
	logs, _ := filepath.Glob(filepath.Join(n.Dir, "pod-logs", "*", "*", "*.log"))
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		rel, _ := filepath.Rel(filepath.Join(n.Dir, "pod-logs"), l)
		fmt.Fprintf(&b, "--- %s\n%s\n", rel, strings.Join(lines, "\n"))
	}
	return b.String()
}

// containerLogs is every line of the node's container logs holding
// substr, each after its log's name.
func containerLogs(n *node.Node, substr string) string {
	logs, _ := filepath.Glob(filepath.Join(n.Dir, "pod-logs", "*", "*", "*.log"))
	var found []string
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, substr) {
				rel, _ := filepath.Rel(filepath.Join(n.Dir, "pod-logs"), l)
				found = append(found, rel+": "+line)
			}
		}
	}
	return strings.Join(found, "\n")
}

// freePort is a port nothing listens on at host.
func freePort(t *testing.T, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// decodeBase64 decodes the content Gitea's contents API answers with.
func decodeBase64(t *testing.T, s string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return string(b)
}
