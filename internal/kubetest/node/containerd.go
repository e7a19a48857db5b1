package node

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/fleetlift/fleetlift/internal/kubetest"
)

// pauseImage is the sandbox image containerd runs for every pod, built
// from ./pause.
const pauseImage = "fleetlift.local/pause:dev"

// containerdConfig is the configuration of containerd (bin/node's, 2.x,
// which reads this version 2 format and migrates it): its own root,
// state and socket under the node's directory, and the CRI plugin with
// bin/node's runc.
//
// restrict_oom_score_adj is required here: lowering oom_score_adj is
// refused in this VM, and without it runc fails with "can't get final
// child's PID from pipe: EOF".
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %[9]q
        BinaryName = %[10]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`

// cniConfig gives each pod an eth0 on a bridge of the node's own, with a
// link-local address and no route: containerd fails a pod sandbox
// whose network has no eth0 address ("failed to find network info for
// sandbox"), so the loopback plugin alone will not do. The host has no
// address on the bridge (unless Options.HostOnBridge) and masquerades
// nothing, so pods reach neither the host (its loopback ports included)
// nor anything beyond it, only each other (allowForward). Each node has a subnet of its
// own (subnet), so that two nodes' host addresses never share a route.
// With Options.InCluster pods have one route, to the service range
// through the host, where kube-proxy forwards the kubernetes Service to
// the API server. Stop deletes the bridge.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "fleetlift-node",
  "plugins": [{
    "type": "bridge", "bridge": %[1]q, "isGateway": false, "isDefaultGateway": false, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "%[3]s.0/24", "rangeStart": "%[3]s.10"}]], "dataDir": %[2]q%[4]s}
  }]
}`

// subnet is the first three octets of the node's pod subnet, a /24 in
// 169.254.100.0-169.254.199.255 chosen by the node's id. The host's
// address, with Options.HostOnBridge, is its .1; pods get .10 and up.
func (n *Node) subnet() string {
	h := fnv.New32a()
	h.Write([]byte(n.id))
	return fmt.Sprintf("169.254.%d", 100+h.Sum32()%100)
}

// makeBridge creates the pods' bridge before the CNI plugin would, with
// IPv6 off: otherwise it gets an IPv6 link-local address through which
// pods could reach host services listening on every address. With
// hostIP, the host gets the subnet's .1 on it (Node.HostIP); with
// apiIP, also apiAddress(), for kube-apiserver (Options.InCluster).
func (n *Node) makeBridge(hostIP, apiIP bool) error {
	br := n.bridge()
	if out, err := exec.Command("ip", "link", "add", "name", br, "type", "bridge").CombinedOutput(); err != nil {
		return fmt.Errorf("create bridge %s: %v: %s", br, err, bytes.TrimSpace(out))
	}
	if err := os.WriteFile(filepath.Join("/proc/sys/net/ipv6/conf", br, "disable_ipv6"), []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("turn IPv6 off on bridge %s: %w", br, err)
	}
	var addrs []string
	if hostIP {
		n.HostIP = n.subnet() + ".1"
		addrs = append(addrs, n.HostIP+"/24")
	}
	if apiIP {
		addrs = append(addrs, n.apiAddress()+"/32")
	}
	for _, a := range addrs {
		if out, err := exec.Command("ip", "addr", "add", a, "dev", br).CombinedOutput(); err != nil {
			return fmt.Errorf("give the host %s on bridge %s: %v: %s", a, br, err, bytes.TrimSpace(out))
		}
	}
	if out, err := exec.Command("ip", "link", "set", br, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("bring bridge %s up: %v: %s", br, err, bytes.TrimSpace(out))
	}
	return n.allowForward()
}

// apiAddress is where kube-apiserver serves with Options.InCluster: an
// address of the host's alone (a /32 on the pods' bridge, gone with it)
// in 198.18.0.0/15, the range set aside for benchmarking networks
// (RFC 2544). The API server refuses to advertise a link-local address
// such as Node.HostIP, and the kubernetes Service's endpoints may not
// hold one; pods reach this address only through the Service, which
// kube-proxy leads there.
func (n *Node) apiAddress() string {
	return "198.18." + strings.TrimPrefix(n.subnet(), "169.254.") + ".1"
}

// bridge is the name of the node's pod bridge (at most 15 bytes).
func (n *Node) bridge() string { return "fln" + strings.TrimPrefix(n.id, "fleetlift-node-") }

// socket is containerd's gRPC socket.
func (n *Node) socket() string { return filepath.Join(n.Dir, "containerd", "containerd.sock") }

// startContainerd writes containerd's configuration and the pods'
// network's (on the bridge makeBridge made), starts it and waits until
// its CRI plugin answers.
func (n *Node) startContainerd() error {
	d := filepath.Join(n.Dir, "containerd")
	// A user-namespaced pod's runc init, a root mapped to an unprivileged
	// host uid, must reach its rootfs in containerd's state directory:
	// the directories on the way may be searched, not listed (as
	// /run/containerd is).
	for _, dir := range []string{n.Dir, d, filepath.Join(d, "state")} {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o711); err != nil {
			return err
		}
	}
	cfg := fmt.Sprintf(containerdConfig,
		filepath.Join(d, "root"), filepath.Join(d, "state"), n.socket(), filepath.Join(d, "ttrpc.sock"),
		filepath.Join(d, "opt"), pauseImage, cniBinDir, filepath.Join(n.Dir, "cni"), filepath.Join(d, "runc"), n.bins.runc)
	if len(n.mirrors) > 0 {
		hosts := filepath.Join(d, "hosts")
		cfg += fmt.Sprintf("  [plugins.\"io.containerd.grpc.v1.cri\".registry]\n    config_path = %q\n", hosts)
		for registry, mirror := range n.mirrors {
			// The mirror is the server too: nothing falls back to the
			// registry itself.
			toml := fmt.Sprintf("server = %[1]q\n\n[host.%[1]q]\n  capabilities = [\"pull\", \"resolve\"]\n", mirror)
			if err := os.MkdirAll(filepath.Join(hosts, registry), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(hosts, registry, "hosts.toml"), []byte(toml), 0o644); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(d, "config.toml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	routes := ""
	if n.inCluster {
		routes = fmt.Sprintf(`, "routes": [{"dst": %q, "gw": %q}]`, kubetest.ServiceCIDR, n.HostIP)
	}
	cni := fmt.Sprintf(cniConfig, n.bridge(), filepath.Join(n.Dir, "cni-ipam"), n.subnet(), routes)
	if err := os.WriteFile(filepath.Join(n.Dir, "cni", "10-bridge.conflist"), []byte(cni), 0o600); err != nil {
		return err
	}
	// containerd starts the shim it finds first on its PATH: bin/node's.
	p, err := n.start("containerd", n.bins.containerd, "--config", filepath.Join(d, "config.toml"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		err := n.cri(ctx, func(rt runtimeapi.RuntimeServiceClient) error {
			_, err := rt.Version(ctx, &runtimeapi.VersionRequest{})
			return err
		})
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("containerd exited: %v\n%s", p.err, p.tail(20))
		case <-ctx.Done():
			return fmt.Errorf("containerd's CRI plugin did not answer within a minute: %v\n%s", err, p.tail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cri calls f with a client of containerd's CRI runtime service.
func (n *Node) cri(ctx context.Context, f func(runtimeapi.RuntimeServiceClient) error) error {
	conn, err := grpc.NewClient("unix://"+n.socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	return f(runtimeapi.NewRuntimeServiceClient(conn))
}

// importImages builds the pause image and imports it, and images from
// the Docker engine, into containerd's k8s.io namespace.
func (n *Node) importImages(root string, images []string) error {
	pause := filepath.Join(n.Dir, "images", "pause")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", pause, "./internal/kubetest/node/pause")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the pause image's command: %v\n%s", err, out)
	}
	archive, err := imageArchive(pauseImage, pause, "/pause")
	if err != nil {
		return err
	}
	if err := n.ctrImport(bytes.NewReader(archive), nil); err != nil {
		return fmt.Errorf("import %s: %w", pauseImage, err)
	}
	if len(images) == 0 {
		return nil
	}
	save := exec.Command(n.bins.docker, append([]string{"save"}, images...)...)
	var saveErr bytes.Buffer
	save.Stderr = &saveErr
	out, err := save.StdoutPipe()
	if err != nil {
		return err
	}
	if err := save.Start(); err != nil {
		return fmt.Errorf("docker save: %w", err)
	}
	ierr := n.ctrImport(out, nil)
	if err := save.Wait(); err != nil {
		return fmt.Errorf("docker save %s: %v: %s", strings.Join(images, " "), err, bytes.TrimSpace(saveErr.Bytes()))
	}
	if ierr != nil {
		return fmt.Errorf("import %s: %w", strings.Join(images, " "), ierr)
	}
	return nil
}

// ctrImport imports the image archive r into containerd's k8s.io
// namespace with ctr, unpacking it for the CRI plugin's snapshotter.
func (n *Node) ctrImport(r io.Reader, extra []string) error {
	args := append([]string{"--address", n.socket(), "--namespace", "k8s.io", "images", "import"}, extra...)
	cmd := exec.Command(n.bins.ctr, append(args, "-")...)
	cmd.Stdin = r
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// imageArchive is a `docker save` archive of an image named name with
// one layer holding the file binary at path, its entrypoint.
func imageArchive(name, binary, path string) ([]byte, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(path, "/"), Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := lw.Write(bin); err != nil {
		return nil, err
	}
	if err := lw.Close(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{path}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(sum[:])}},
	})
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{name}, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	w := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{"config.json", config}, {"layer.tar", layer.Bytes()}, {"manifest.json", manifest}} {
		if err := w.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// removePods stops and removes every pod sandbox (and so every
// container) containerd runs: the kubelet leaves them running when it
// stops.
func (n *Node) removePods(ctx context.Context) error {
	return n.cri(ctx, func(rt runtimeapi.RuntimeServiceClient) error {
		list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			return fmt.Errorf("list pod sandboxes: %w", err)
		}
		var errs []error
		for _, s := range list.Items {
			if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
				errs = append(errs, fmt.Errorf("stop pod sandbox %s (%s/%s): %w", s.Id, s.Metadata.GetNamespace(), s.Metadata.GetName(), err))
				continue
			}
			if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
				errs = append(errs, fmt.Errorf("remove pod sandbox %s (%s/%s): %w", s.Id, s.Metadata.GetNamespace(), s.Metadata.GetName(), err))
			}
		}
		return errors.Join(errs...)
	})
}
