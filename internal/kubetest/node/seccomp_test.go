package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/kubetest/node"
)

// The seccomp component, as deploy/components/seccomp ships it.
const (
	seccompDir       = "deploy/components/seccomp"
	seccompLocalhost = "fleetlift/jail.json"
)

// seccompInstalled runs the component's installer DaemonSet on the node
// and then sandbox-like pods in a restricted namespace: with the profile
// it installed (Localhost fleetlift/jail.json), and with the one the
// Security Profiles Operator writes for components/seccomp-operator, a
// pod's process makes user and mount namespaces, as the agent's jail
// does, and is refused what the runtime's default profile refuses a pod
// without capabilities; with the runtime's default profile it may not
// make the namespaces.
func seccompInstalled(t *testing.T, n *node.Node) {
	ctx := context.Background()
	profile, err := os.ReadFile(filepath.Join(n.Env.Root, seccompDir, "fleetlift-jail.json"))
	if err != nil {
		t.Fatal(err)
	}
	ns, ds := installerObjects(t, n)
	if err := n.Env.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace %s: %v", ns.Name, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fleetlift-seccomp", Namespace: ns.Name},
		Data: map[string]string{"jail.json": string(profile)}}
	if err := n.Env.Client.Create(ctx, cm); err != nil {
		t.Fatalf("create the profile's ConfigMap: %v", err)
	}
	// The node's kubelet keeps its root, and so its seccomp directory,
	// under the node's directory rather than /var/lib/kubelet.
	hostDir := filepath.Join(n.Dir, "kubelet", "seccomp")
	for i := range ds.Spec.Template.Spec.Volumes {
		if hp := ds.Spec.Template.Spec.Volumes[i].HostPath; hp != nil {
			if hp.Path != "/var/lib/kubelet/seccomp" {
				t.Fatalf("the installer writes %s, not the kubelet's default seccomp directory", hp.Path)
			}
			hp.Path = hostDir
		}
	}
	for _, cs := range [][]corev1.Container{ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers} {
		for i := range cs {
			cs[i].Image, cs[i].ImagePullPolicy = sandboxImage, corev1.PullNever
		}
	}
	if err := n.Env.Client.Create(ctx, ds); err != nil {
		t.Fatalf("create the installer DaemonSet: %v", err)
	}
	installed := filepath.Join(hostDir, filepath.FromSlash(seccompLocalhost))
	waitFor(t, "the installer's profile on the node and its pod Ready", time.Minute, func() (bool, string) {
		got, err := os.ReadFile(installed)
		if err != nil {
			return false, err.Error()
		}
		if !bytes.Equal(got, profile) {
			return false, installed + " differs from " + seccompDir + "/fleetlift-jail.json"
		}
		var cur appsv1.DaemonSet
		if err := n.Env.Client.Get(ctx, client.ObjectKeyFromObject(ds), &cur); err != nil {
			return false, err.Error()
		}
		return cur.Status.NumberReady == 1, fmt.Sprintf("the DaemonSet has %d of %d pods ready", cur.Status.NumberReady, cur.Status.DesiredNumberScheduled)
	})

	// The file the Security Profiles Operator's daemon writes for
	// components/seccomp-operator's SeccompProfile: its spec, as JSON,
	// at operator/<namespace>/<name>.json. (The operator itself does not
	// run here: its images cannot be pulled.)
	opProfile, opLocalhost := operatorProfile(t, n)
	opFile := filepath.Join(hostDir, filepath.FromSlash(opLocalhost))
	if err := os.MkdirAll(filepath.Dir(opFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(opFile, opProfile, 0o644); err != nil {
		t.Fatal(err)
	}

	sandboxNS := n.Env.Namespace(t, "seccomp", kubetest.RestrictedLabels)
	// What the jail does first: a user namespace mapping the caller to
	// root, and in it a mount namespace where root may mount.
	const jail = "unshare --user --map-root-user --mount sh -c 'mount -t tmpfs jail /mnt && echo namespaces made'"
	// kcmp, which moby's profile allows only with CAP_SYS_PTRACE and the
	// kernel allows anyone on their own process: a profile read without
	// its capability conditions allows it to a pod that has none.
	const kcmp = `python3 -c 'import ctypes, os, platform; libc = ctypes.CDLL(None, use_errno=True); ` +
		`r = libc.syscall({"x86_64": 312, "aarch64": 272}[platform.machine()], os.getpid(), os.getpid(), 1, 0, 0); ` +
		`print("kcmp allowed" if r == 0 else "kcmp refused: errno %d" % ctypes.get_errno())'`
	run := func(name string, profile *corev1.SeccompProfile, script string) (int32, string) {
		spec := restricted(corev1.Container{Name: "main", Image: sandboxImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"/bin/sh", "-c", script + " 2>&1"}})
		spec.SecurityContext.SeccompProfile = profile
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sandboxNS, Labels: map[string]string{"app": name}}, Spec: spec}
		if err := n.Env.Client.Create(ctx, pod); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		got := waitTerminated(t, n, sandboxNS, client.MatchingLabels{"app": name})
		log, err := kubernetes.NewForConfigOrDie(n.Env.Config).CoreV1().Pods(sandboxNS).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("read pod %s's log: %v: %s", name, err, log)
		}
		return got.Status.ContainerStatuses[0].State.Terminated.ExitCode, strings.TrimSpace(string(log))
	}
	for _, p := range []struct{ name, localhost string }{{"installed", seccompLocalhost}, {"operator", opLocalhost}} {
		profile := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(p.localhost)}
		if code, log := run(p.name+"-jail", profile, jail); code != 0 || log != "namespaces made" {
			t.Errorf("with the %s profile (%s) the pod exited %d and said %q; want 0 and namespaces made", p.name, p.localhost, code, log)
		}
		if code, log := run(p.name+"-kcmp", profile, kcmp); code != 0 || log != "kcmp refused: errno 1" {
			t.Errorf("with the %s profile (%s) the pod exited %d and said %q; want kcmp refused with EPERM, as the runtime's default profile does", p.name, p.localhost, code, log)
		}
	}
	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	if code, log := run("default-jail", runtimeDefault, jail); code == 0 || !strings.Contains(log, "Operation not permitted") {
		t.Errorf("with the runtime's default profile the pod exited %d and said %q; want unshare refused", code, log)
	}
	if code, log := run("default-kcmp", runtimeDefault, kcmp); code != 0 || log != "kcmp refused: errno 1" {
		t.Errorf("with the runtime's default profile the pod exited %d and said %q; want kcmp refused with EPERM", code, log)
	}
}

// operatorProfile is what the Security Profiles Operator's daemon writes
// on a node for components/seccomp-operator's SeccompProfile (the JSON
// of its spec), and the Localhost profile pods name it by.
func operatorProfile(t *testing.T, n *node.Node) ([]byte, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.Env.Root, "deploy/components/seccomp-operator/fleetlift-jail.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sp struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     json.RawMessage   `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &sp); err != nil {
		t.Fatalf("seccomp-operator/fleetlift-jail.yaml: %v", err)
	}
	return sp.Spec, "operator/" + sp.Metadata.Namespace + "/" + sp.Metadata.Name + ".json"
}

// installerObjects decodes the component's installer.yaml: its
// Namespace and its DaemonSet.
func installerObjects(t *testing.T, n *node.Node) (*corev1.Namespace, *appsv1.DaemonSet) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.Env.Root, seccompDir, "installer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ns *corev1.Namespace
	var ds *appsv1.DaemonSet
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var u map[string]any
		if err := dec.Decode(&u); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s/installer.yaml: %v", seccompDir, err)
		}
		switch u["kind"] {
		case "Namespace":
			ns = &corev1.Namespace{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u, ns)
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u, ds)
		}
		if err != nil {
			t.Fatalf("%s/installer.yaml: %s: %v", seccompDir, u["kind"], err)
		}
	}
	if ns == nil || ds == nil || ds.Namespace != ns.Name {
		t.Fatalf("%s/installer.yaml holds no Namespace and DaemonSet in it", seccompDir)
	}
	return ns, ds
}

// waitFor polls cond every 200 ms for up to timeout, failing with its
// last word.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s: %s", what, timeout, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
