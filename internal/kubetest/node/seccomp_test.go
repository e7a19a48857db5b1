package node_test

import (
	"bytes"
	"context"
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
// it installed (Localhost fleetlift/jail.json) a pod's process makes user
// and mount namespaces, as the agent's jail does; with the runtime's
// default profile it may not.
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

	sandboxNS := n.Env.Namespace(t, "seccomp", kubetest.RestrictedLabels)
	// What the jail does first: a user namespace mapping the caller to
	// root, and in it a mount namespace where root may mount.
	const script = "unshare --user --map-root-user --mount sh -c 'mount -t tmpfs jail /mnt && echo namespaces made'"
	run := func(name string, profile *corev1.SeccompProfile) (int32, string) {
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
	if code, log := run("localhost", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(seccompLocalhost)}); code != 0 || log != "namespaces made" {
		t.Errorf("with the installed profile the pod exited %d and said %q; want 0 and namespaces made", code, log)
	}
	if code, log := run("runtime-default", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}); code == 0 || !strings.Contains(log, "Operation not permitted") {
		t.Errorf("with the runtime's default profile the pod exited %d and said %q; want unshare refused", code, log)
	}
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
