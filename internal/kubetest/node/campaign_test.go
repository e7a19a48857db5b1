package node_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/kubetest/node"
	"github.com/fleetlift/fleetlift/internal/listen"
)

// How a campaign's sandbox pods run (campaignRuns, podsRefused).
type sandboxMode int

const (
	// unjailed: the agent runs the work unjailed (--sandbox-isolation
	// none), in a namespace enforcing Pod Security's restricted profile.
	unjailed sandboxMode = iota
	// jailed: the agent jails the work (--sandbox-isolation namespaces)
	// in pods of their own user namespaces (--user-namespaces) with the
	// shipped seccomp profile (as components/seccomp installs it), in a
	// namespace enforcing baseline: restricted refuses an unmasked /proc
	// even in a user-namespaced pod, baseline admits it there
	// (Kubernetes 1.35 and later).
	jailed
	// jailedRestricted is jailed in a namespace enforcing restricted,
	// which refuses the pods.
	jailedRestricted
	// missingImage is unjailed, with a task image the node lacks (and
	// may not pull: imagePullPolicy Never).
	missingImage
	// overTime is jailed, its command sleeping past the task's timeout.
	overTime
	// memoryHog is jailed, its command growing past the pod's memory
	// limit (the controller's --default-memory, 512Mi).
	memoryHog
)

// campaignRuns runs a campaign as an operator would against a cluster
// (docs/kubernetes.md): the shipped RBAC installed, bin/fleetlift-controller
// running as its service account, and `bin/fleetlift run --sandbox
// kubernetes` as the worker's, serving its gateway on the host's address
// on the pods' bridge. Each repository's sandbox is a pod the kubelet
// runs from the sandbox image, its agent copied in from the agent image;
// the agent clones through the gateway (the pods hold no token and reach
// nothing else), the worker pushes the change, and each repository gets
// its branch.
func campaignRuns(t *testing.T, n *node.Node, mode sandboxMode) {
	c := runCampaign(t, n, mode)
	if c.err != nil || !bytes.Contains(c.out, []byte("2 repositories: 2 completed")) {
		t.Fatalf("fleetlift run: %v\n%s\nsandbox pods: %s", c.err, c.out, c.pods())
	}
	for i, u := range c.urls {
		bare := strings.TrimPrefix(u, "file://")
		got, err := exec.Command("git", "-C", bare, "show", "auto/node/node-bump:go.mod").CombinedOutput()
		if err != nil || !strings.Contains(string(got), "go 1.26") {
			t.Errorf("repository %d: branch auto/node/node-bump missing or unchanged: %v\n%s", i, err, got)
		}
	}
	seen := c.pods()
	if !strings.Contains(seen, "on localhost") || !strings.Contains(seen, sandboxImage) || !strings.Contains(seen, agentImage) {
		t.Errorf("no sandbox pod ran the sandbox and agent images on node localhost; pods seen: %s", seen)
	}
}

// podsRefused runs the jailed campaign where Pod Security refuses its
// pods: the Job controller cannot make them and says so only in events,
// and the controller fails each request on it, so the run ends at once,
// naming the refusal, instead of waiting for its sandboxes to time out.
func podsRefused(t *testing.T, n *node.Node) {
	c := runCampaign(t, n, jailedRestricted)
	if c.err == nil || !bytes.Contains(c.out, []byte("2 repositories: 0 completed, 2 failed")) ||
		!bytes.Contains(c.out, []byte("(PolicyRefused)")) || !bytes.Contains(c.out, []byte("violates PodSecurity")) || !bytes.Contains(c.out, []byte("procMount")) {
		t.Fatalf("fleetlift run: %v; want it failed, naming the Pod Security violation:\n%s", c.err, c.out)
	}
	if c.pods() != "none" {
		t.Errorf("pods ran: %s", c.pods())
	}
}

// imageMissing runs a campaign whose task image the node lacks: the
// kubelet cannot start its pods, the controller classifies that from the
// real container status, and each repository fails at once, its error
// naming the image failure.
func imageMissing(t *testing.T, n *node.Node) {
	c := runCampaign(t, n, missingImage)
	if c.err == nil || !bytes.Contains(c.out, []byte("2 repositories: 0 completed, 2 failed")) ||
		bytes.Count(c.out, []byte("(ImagePullFailed)")) < 2 || !bytes.Contains(c.out, []byte("fleetlift/sandbox:missing")) {
		t.Fatalf("fleetlift run: %v; want both repositories failed, naming ImagePullFailed and the image:\n%s", c.err, c.out)
	}
}

// campaign is what runCampaign ran: the run's output and error, the
// repositories, and the pods seen while it ran.
type campaign struct {
	out  []byte
	err  error
	urls []string
	pods func() string
}

// runCampaign runs a campaign over two repositories whose sandboxes run
// as mode says, as campaignRuns describes.
func runCampaign(t *testing.T, n *node.Node, mode sandboxMode) campaign {
	t.Helper()
	bins := map[string]string{}
	for _, b := range []string{"fleetlift", "fleetlift-controller"} {
		bins[b] = filepath.Join(n.Env.Root, "bin", b)
		if _, err := os.Stat(bins[b]); err != nil {
			t.Fatalf("bin/%s is missing: run `make build` first (%v)", b, err)
		}
	}
	system, sandbox := n.Env.Install(t)
	isolation := []string{"--sandbox-isolation", "none"}
	image := sandboxImage
	if mode == missingImage {
		image = "fleetlift/sandbox:missing"
	}
	command, timeout := `[sed, -i, "s/^go 1.21$/go 1.26/", go.mod]`, "5m"
	if mode == overTime {
		command, timeout = "[sleep, \"600\"]", "20s"
	}
	if mode == memoryHog {
		// tail holds the one endless line of /dev/zero in memory.
		command = "[tail, /dev/zero]"
	}
	jailedMode := mode == jailed || mode == overTime || mode == memoryHog
	if jailedMode || mode == jailedRestricted {
		installProfile(t, n)
		isolation = []string{"--sandbox-isolation", "namespaces", "--seccomp-localhost-profile", seccompLocalhost, "--user-namespaces"}
	}
	if jailedMode {
		jailNamespace(t, n, sandbox)
	}
	stopController := startController(t, bins["fleetlift-controller"],
		kubetest.Kubeconfig(t, n.Env.ServiceAccountConfig(system, "fleetlift-controller")),
		append([]string{"--namespace", sandbox, "--leader-elect=false",
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--allowed-image", "fleetlift/sandbox:*", "--image-pull-policy", "Never",
			"--default-cpu", "250m", "--default-memory", "512Mi"}, isolation...)...)
	defer stopController()

	root := t.TempDir()
	urls := bareRepos(t, root, 2)
	def := filepath.Join(root, "bump.yaml")
	spec := fmt.Sprintf(`version: 1
kind: Campaign
id: node-bump
title: Bump go on a real node
# Every repository runs, even where every one fails (the failing cases).
failure: {threshold_percent: 100}
template:
  execution:
    deterministic:
      image: %s
      command: %s
  timeout: %s
  pull_request: {branch_prefix: auto/node, title: Bump go}
repositories:
  - url: %s
  - url: %s
`, image, command, timeout, urls[0], urls[1])
	if err := os.WriteFile(def, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	gateway := net.JoinHostPort(n.HostIP, freePort(t, n.HostIP))
	cmd := exec.Command(bins["fleetlift"], "run", "--file", def,
		"--temporal-address", net.JoinHostPort("127.0.0.1", freePort(t, "127.0.0.1")),
		"--state-dir", filepath.Join(root, "state"),
		"--sandbox", "kubernetes", "--sandbox-namespace", sandbox,
		"--kubeconfig", kubetest.Kubeconfig(t, n.Env.ServiceAccountConfig(system, "fleetlift-worker")),
		"--gateway-listen", gateway, "--gateway-url", "http://"+gateway,
		"--allow-file-root", root)
	cmd.Env = append(os.Environ(), "HOME="+root, "XDG_CONFIG_HOME="+filepath.Join(root, ".config"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The pods the run makes, seen while it runs: their node and what
	// their containers ran.
	c := campaign{urls: urls, pods: n.WatchPods(t, sandbox)}
	start := time.Now()
	c.out, c.err = runFor(cmd, 5*time.Minute)
	t.Logf("fleetlift run took %s", time.Since(start).Round(time.Millisecond))
	return c
}

// installProfile writes the shipped seccomp profile where the kubelet
// reads Localhost profiles, as components/seccomp's installer does.
func installProfile(t *testing.T, n *node.Node) {
	t.Helper()
	profile, err := os.ReadFile(filepath.Join(n.Env.Root, seccompDir, "fleetlift-jail.json"))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(n.Dir, "kubelet", "seccomp", filepath.FromSlash(seccompLocalhost))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, profile, 0o644); err != nil {
		t.Fatal(err)
	}
}

// agentImage is the image the controller installs the agent from.
const agentImage = "fleetlift/agent:dev"

// bareRepos makes k bare repositories under root, each with a go.mod
// saying go 1.21 on main, and returns their file URLs.
func bareRepos(t *testing.T, root string, k int) []string {
	t.Helper()
	var urls []string
	for i := range k {
		src, bare := filepath.Join(root, "src", fmt.Sprintf("svc%d", i)), filepath.Join(root, fmt.Sprintf("svc%d.git", i))
		script := fmt.Sprintf(`set -e
git init -q -b main %[1]s
printf 'module example.com/svc%[3]d\n\ngo 1.21\n' > %[1]s/go.mod
git -C %[1]s add go.mod
git -C %[1]s -c user.email=t@example.com -c user.name=t commit -qm init
git clone -q --bare %[1]s %[2]s`, src, bare, i)
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("make repository: %v\n%s", err, out)
		}
		urls = append(urls, "file://"+bare)
	}
	return urls
}

// startController runs the controller binary with args and a kubeconfig;
// the returned function stops it, failing the test if it had exited.
func startController(t *testing.T, bin, kubeconfig string, args ...string) func() {
	t.Helper()
	var log bytes.Buffer
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the controller: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return func() {
		select {
		case err := <-exited:
			t.Errorf("the controller exited during the test: %v\n%s", err, log.String())
			return
		default:
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("the controller's log:\n%s", log.String())
		}
	}
}

// runFor runs cmd, killing it after d, and returns its combined output.
func runFor(cmd *exec.Cmd, d time.Duration) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	timer := time.AfterFunc(d, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	if err != nil && !timer.Stop() {
		err = fmt.Errorf("killed after %s: %w", d, err)
	}
	return out.Bytes(), err
}

// freePort is a port nothing listens on at host.
func freePort(t *testing.T, host string) string {
	t.Helper()
	ports, err := listen.FreePorts(host, 1)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(ports[0])
}

// pastTimeout runs a jailed campaign whose command sleeps past the
// task's timeout of 20 s: each repository fails once the timeout passes
// (not when its sandbox's deadline would, later), and the run says so
// for each.
func pastTimeout(t *testing.T, n *node.Node) {
	c := runCampaign(t, n, overTime)
	// The worker's own timer or the agent's, whichever fires first,
	// says it the same way.
	if c.err == nil || !bytes.Contains(c.out, []byte("2 repositories: 0 completed, 2 failed")) ||
		bytes.Count(c.out, []byte("timed out after 20s")) < 2 {
		t.Fatalf("fleetlift run: %v; want both repositories failed, each naming its 20s timeout:\n%s", c.err, c.out)
	}
}

// outOfMemory runs a jailed campaign whose command grows past its pod's
// memory limit: the pod's memory cgroup kills it, and each repository
// fails at once, its error naming the out-of-memory and the limit, not a
// later symptom (a retry's clone, a timeout).
func outOfMemory(t *testing.T, n *node.Node) {
	c := runCampaign(t, n, memoryHog)
	if c.err == nil || !bytes.Contains(c.out, []byte("2 repositories: 0 completed, 2 failed")) ||
		bytes.Count(c.out, []byte("ran out of memory")) < 2 || !bytes.Contains(c.out, []byte("512 MiB")) {
		t.Fatalf("fleetlift run: %v; want both repositories failed, each naming the out-of-memory at 512 MiB:\n%s\nsandbox pods: %s", c.err, c.out, c.pods())
	}
}
