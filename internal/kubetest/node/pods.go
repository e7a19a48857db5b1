package node

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WatchPods records, until the test ends, each pod in namespace ns as
// last seen (DescribePod), and the node's pressure (DescribePressure).
// The returned function says what it saw, one pod after another (or
// "none"), then the pressure last seen on the node, if any.
func (n *Node) WatchPods(t testing.TB, ns string) func() string {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	seen := map[string]string{}
	// pressure is the last pressure seen on the node, which may have
	// passed by the time the test fails.
	var pressure string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var pods corev1.PodList
			if err := n.Env.Client.List(ctx, &pods, client.InNamespace(ns)); err == nil {
				mu.Lock()
				for _, p := range pods.Items {
					seen[p.Name] = DescribePod(p)
				}
				mu.Unlock()
			}
			var node corev1.Node
			if err := n.Env.Client.Get(ctx, client.ObjectKey{Name: n.Name}, &node); err == nil {
				mu.Lock()
				if s := DescribePressure(node); s != "" {
					pressure = s
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		lines := make([]string, 0, len(seen))
		for _, s := range seen {
			lines = append(lines, s)
		}
		sort.Strings(lines)
		if len(lines) == 0 {
			lines = append(lines, "none")
		}
		if pressure != "" {
			lines = append(lines, "node "+n.Name+" under "+pressure)
		}
		return strings.Join(lines, "; ")
	}
}

// DescribePod is a pod's namespace and name, node and phase, why it is
// not scheduled, "jailed" when it runs in a user namespace of its own
// with a Localhost seccomp profile (as the agent's jail needs), and its
// containers' images and states.
func DescribePod(p corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s on %s %s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase)
	sc := p.Spec.SecurityContext
	if p.Spec.HostUsers != nil && !*p.Spec.HostUsers && sc != nil && sc.SeccompProfile != nil &&
		sc.SeccompProfile.Type == corev1.SeccompProfileTypeLocalhost {
		b.WriteString(" jailed")
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			fmt.Fprintf(&b, " unscheduled (%s: %s)", c.Reason, c.Message)
		}
	}
	b.WriteString(":")
	// The image each container names (a digest-pinned one's status shows
	// only the image's id).
	named := map[string]string{}
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		named[c.Name] = c.Image
	}
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		image := named[s.Name]
		if image == "" {
			image = s.Image
		}
		fmt.Fprintf(&b, " %s (%s)", s.Name, image)
		switch {
		case s.State.Terminated != nil:
			fmt.Fprintf(&b, " exited %d %s", s.State.Terminated.ExitCode, s.State.Terminated.Reason)
		case s.State.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s %s", s.State.Waiting.Reason, s.State.Waiting.Message)
		case s.State.Running != nil:
			fmt.Fprintf(&b, " running, %d restarts", s.RestartCount)
		}
	}
	return b.String()
}

// DescribePressure is what of the node's conditions says it is short of
// disk, memory or process ids, with the taints that keep pods off it
// ("" when none does): a pod "unscheduled" for an untolerated taint is
// most often a node whose disk filled.
func DescribePressure(n corev1.Node) string {
	var out []string
	for _, c := range n.Status.Conditions {
		switch c.Type {
		case corev1.NodeDiskPressure, corev1.NodeMemoryPressure, corev1.NodePIDPressure:
			if c.Status == corev1.ConditionTrue {
				out = append(out, fmt.Sprintf("%s (%s)", c.Type, c.Message))
			}
		}
	}
	if len(out) == 0 {
		return ""
	}
	for _, t := range n.Spec.Taints {
		out = append(out, fmt.Sprintf("taint %s:%s", t.Key, t.Effect))
	}
	return strings.Join(out, ", ")
}
