package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// readyPoll is how often Provision looks for the agent's protocol
// directory, the sign that it serves.
const readyPoll = 10 * time.Millisecond

// Provision creates and starts sandbox opts.ID's container, or finds the
// one an earlier call (of this or an earlier provider of the same scope)
// made, and waits until the agent serves: until it has made
// /workspace/.fleetlift. A container that was created but never started
// is started.
func (p *Provider) Provision(ctx context.Context, opts sandbox.ProvisionOptions) (*sandbox.Sandbox, error) {
	id := opts.ID
	if err := checkID(id); err != nil {
		return nil, sandbox.Refused(err)
	}
	if err := checkEnv(opts.Env); err != nil {
		return nil, sandbox.Refused(err)
	}
	if err := checkEnv(opts.Secrets); err != nil {
		return nil, sandbox.Refused(err)
	}
	for k := range opts.Secrets {
		if strings.Contains(k, ",") {
			return nil, sandbox.Refused(fmt.Errorf("secret name %q contains a comma", k))
		}
	}
	unlock := p.lock(id)
	defer unlock()

	c, err := p.find(ctx, id)
	if errors.Is(err, sandbox.ErrNotFound) && p.containerGone(ctx, p.containerName(id)) {
		c, err = p.create(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	if c.State != nil && c.State.Status == container.StateCreated {
		// Made by this call, or by one that stopped before starting it:
		// preparing again does no harm.
		if err := p.prepare(ctx, c.ID, id, c.Config.Image); err != nil {
			return nil, err
		}
		if err := p.start(ctx, c.ID); err != nil {
			return nil, err
		}
	}
	if err := p.waitReady(ctx, c.ID); err != nil {
		return nil, err
	}
	if err := p.gwKeys.Open(ctx, id); err != nil {
		return nil, fmt.Errorf("model gateway: %w", err)
	}
	if c, err = p.find(ctx, id); err != nil {
		return nil, err
	}
	// Secrets come from the worker: a Secret reference cannot apply.
	return sandbox.Ignoring(&sandbox.Sandbox{ID: id, Provider: p.Name(), WorkingDir: Workspace, Phase: p.status(c).Phase}, opts), nil
}

// create makes the sandbox's volumes and container, not started; Provision
// prepares and starts it.
func (p *Provider) create(ctx context.Context, opts sandbox.ProvisionOptions) (container.InspectResponse, error) {
	id := opts.ID
	agentMount, err := p.agentMount(ctx)
	if err != nil {
		return container.InspectResponse{}, err
	}
	image := cmpOr(opts.Image, p.image)
	if _, err := p.cli.ImageInspect(ctx, image); err != nil {
		return container.InspectResponse{}, imageError("image", image, err)
	}
	res, err := resources(opts.Resources, p.pids)
	if err != nil {
		return container.InspectResponse{}, sandbox.Refused(err)
	}

	labels := map[string]string{}
	maps.Copy(labels, opts.Labels)
	labels[LabelSandbox] = id
	labels[LabelScope] = p.scope
	if len(opts.Secrets) > 0 {
		labels[LabelSecretNames] = strings.Join(slices.Sorted(maps.Keys(opts.Secrets)), ",")
	}
	if opts.Timeout > 0 {
		labels[LabelExpires] = time.Now().Add(opts.Timeout).UTC().Format(time.RFC3339Nano)
		labels[LabelTimeout] = opts.Timeout.String()
	}
	if opts.Resources.Memory != "" {
		labels[LabelMemory] = opts.Resources.Memory
	}
	volumeLabels := map[string]string{LabelSandbox: id, LabelScope: p.scope}
	for _, v := range []string{p.workspaceVolume(id), p.homeVolume(id)} {
		if _, err := p.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: v, Labels: volumeLabels}); err != nil {
			return container.InspectResponse{}, fmt.Errorf("create volume %s: %w", v, err)
		}
	}

	env := map[string]string{}
	maps.Copy(env, opts.Env)
	maps.Copy(env, opts.Secrets)
	env["HOME"] = Home

	mounts := []mount.Mount{
		{Type: mount.TypeVolume, Source: p.workspaceVolume(id), Target: Workspace, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
		{Type: mount.TypeVolume, Source: p.homeVolume(id), Target: Home, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
		agentMount,
	}
	for _, b := range p.binds {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: b, Target: b})
	}
	if p.sockets != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: p.sockets, Target: SocketMount, ReadOnly: true})
	}
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(p.network),
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges", "seccomp=" + p.seccomp},
		// The agent's jail mounts a fresh /proc in its PID namespace,
		// which the kernel allows only where no part of /proc is masked
		// or read-only (systempaths=unconfined).
		MaskedPaths:    []string{},
		ReadonlyPaths:  []string{},
		ReadonlyRootfs: p.readOnly,
		Mounts:         mounts,
		Resources:      res,
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	if p.readOnly {
		host.Tmpfs = map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777"}
	}
	cmd := append([]string{AgentPath, "serve", "--workspace", Workspace}, p.serve...)
	cfg := &container.Config{
		Image:      image,
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Env:        envList(env),
		Entrypoint: []string{},
		Cmd:        cmd,
		WorkingDir: Workspace,
		Labels:     labels,
		Hostname:   "sandbox",
	}
	_, err = p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: p.containerName(id), Config: cfg, HostConfig: host})
	if cerrdefs.IsConflict(err) {
		// Another provider of this scope made it meanwhile.
		return p.find(ctx, id)
	}
	if err != nil {
		return container.InspectResponse{}, fmt.Errorf("create container: %w", err)
	}
	return p.find(ctx, id)
}

// prepare gives the agent its workspace and home before the container
// starts: the volumes' roots become uid 1000's, through the archive API,
// so that no process in the sandbox ever needs a capability. The engine
// refuses archives on a read-only root file system, even for the paths of
// volumes, and applies no owner to an archive's "." entry; so with a
// read-only root the volumes are prepared through a container of the same
// image, with the same volumes, that never starts.
func (p *Provider) prepare(ctx context.Context, ref, id, image string) error {
	if p.readOnly {
		helper, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config: &container.Config{Image: image, Entrypoint: []string{}, Cmd: []string{"true"}, Labels: map[string]string{LabelSandbox: id, LabelScope: p.scope}},
			HostConfig: &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{
				{Type: mount.TypeVolume, Source: p.workspaceVolume(id), Target: Workspace, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
				{Type: mount.TypeVolume, Source: p.homeVolume(id), Target: Home, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
			}},
		})
		if err != nil {
			return fmt.Errorf("prepare workspace and home: %w", err)
		}
		defer func() {
			rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_, _ = p.cli.ContainerRemove(rmCtx, helper.ID, client.ContainerRemoveOptions{Force: true})
		}()
		ref = helper.ID
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{strings.TrimPrefix(Workspace, "/"), strings.TrimPrefix(Home, "/")} {
		// Parents of the home directory keep the image's owner.
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, Uid: UID, Gid: GID, ModTime: time.Now(), Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := p.cli.CopyToContainer(ctx, ref, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf}); err != nil {
		return fmt.Errorf("prepare workspace and home: %w", err)
	}
	return nil
}

func (p *Provider) start(ctx context.Context, ref string) error {
	if _, err := p.cli.ContainerStart(ctx, ref, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start container: %w", err)
	}
	return nil
}

// waitReady waits until the agent has made its protocol directory, or
// fails when the container stops first.
func (p *Provider) waitReady(ctx context.Context, ref string) error {
	dir := Workspace + "/.fleetlift"
	for {
		_, err := p.cli.ContainerStatPath(ctx, ref, client.ContainerStatPathOptions{Path: dir})
		if err == nil {
			return nil
		}
		if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("wait for the agent: %w", err)
		}
		res, err := p.cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("wait for the agent: %w", err)
		}
		if st := res.Container.State; st != nil && !st.Running && st.Status != container.StateCreated {
			return fmt.Errorf("agent exited before serving (code %d, %s)%s", st.ExitCode, strings.TrimSpace(st.Error), p.tail(ctx, ref))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the agent: %w", ctx.Err())
		case <-time.After(readyPoll):
		}
	}
}

// tail is the end of the container's log, for errors.
func (p *Provider) tail(ctx context.Context, ref string) string {
	logs, err := p.cli.ContainerLogs(ctx, ref, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return ""
	}
	defer logs.Close()
	var out, errOut bytes.Buffer
	if _, err := demux(&out, &errOut, io.LimitReader(logs, 16<<10)); err != nil {
		return ""
	}
	text := strings.TrimSpace(out.String() + errOut.String())
	if text == "" {
		return ""
	}
	return ": " + text
}

// agentMount is the mount that puts the agent binary at AgentPath.
func (p *Provider) agentMount(ctx context.Context) (mount.Mount, error) {
	if p.agentBin != "" {
		return mount.Mount{Type: mount.TypeBind, Source: p.agentBin, Target: AgentPath, ReadOnly: true}, nil
	}
	volume, err := p.agentVolume(ctx)
	if err != nil {
		return mount.Mount{}, err
	}
	return mount.Mount{Type: mount.TypeVolume, Source: volume, Target: AgentDir, ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}, nil
}

// imageError is why image (what names its role) cannot be had: one the
// engine does not have is refused (sandbox.ErrRefused), since no image is
// pulled; any other failure to look it up may pass.
func imageError(what, image string, err error) error {
	if cerrdefs.IsNotFound(err) {
		return sandbox.Refused(fmt.Errorf("%s %s is not on the engine (no image is pulled: build or load it there)", what, image))
	}
	return fmt.Errorf("%s %s: %w", what, image, err)
}

// agentVolume returns the volume that holds the agent image's binary,
// filling it first if needed: one volume per agent image (by id) and
// engine, shared by every scope. It is filled through a container of the
// agent image that never starts: the binary is copied out of the image
// and into the volume under a temporary name, then hard-linked to its
// name, so a sandbox never sees a partial binary.
func (p *Provider) agentVolume(ctx context.Context) (string, error) {
	img, err := p.cli.ImageInspect(ctx, p.agentImage)
	if err != nil {
		return "", imageError("agent image", p.agentImage, err)
	}
	imageID := img.ID
	// One fill at a time in this process; providers in other processes
	// fill under a temporary name and link, so the result is whole either
	// way.
	p.agentMu.Lock()
	defer p.agentMu.Unlock()
	if name, ok := p.agentVolumes[imageID]; ok {
		return name, nil
	}
	name := "fleetlift-agent-" + shortID(imageID)
	if _, err := p.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: map[string]string{LabelAgentImage: imageID}}); err != nil {
		return "", fmt.Errorf("create agent volume %s: %w", name, err)
	}
	helper, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: imageID, Entrypoint: []string{}, Cmd: []string{agentBinaryPath(img.Config)}, Labels: map[string]string{LabelAgentImage: imageID}},
		HostConfig: &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{
			{Type: mount.TypeVolume, Source: name, Target: AgentDir, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
		}},
	})
	if err != nil {
		return "", fmt.Errorf("fill agent volume %s: %w", name, err)
	}
	defer func() {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = p.cli.ContainerRemove(rmCtx, helper.ID, client.ContainerRemoveOptions{Force: true})
	}()
	if err := fillAgentVolume(ctx, p.cli, helper.ID, agentBinaryPath(img.Config)); err != nil {
		return "", fmt.Errorf("fill agent volume %s from %s: %w", name, p.agentImage, err)
	}
	p.agentVolumes[imageID] = name
	return name, nil
}

// agentBinaryPath is where the agent image keeps fleetlift-agent: what its
// entrypoint (or else its command) runs, when that is an absolute path,
// else /fleetlift-agent.
func agentBinaryPath(cfg *dockerspec.DockerOCIImageConfig) string {
	if cfg != nil {
		for _, argv := range [][]string{cfg.Entrypoint, cfg.Cmd} {
			if len(argv) > 0 && strings.HasPrefix(argv[0], "/") {
				return path.Clean(argv[0])
			}
		}
	}
	return "/fleetlift-agent"
}

func fillAgentVolume(ctx context.Context, cli *client.Client, helper, binary string) error {
	if st, err := cli.ContainerStatPath(ctx, helper, client.ContainerStatPathOptions{Path: AgentPath}); err == nil && st.Stat.Mode.IsRegular() {
		return nil
	}
	// Read whole before writing: the engine serves one archive request
	// per container at a time.
	bin, modTime, err := readAgentBinary(ctx, cli, helper, binary)
	if err != nil {
		return err
	}
	tmp := ".fleetlift-agent." + randomHex(6)
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: tmp, Size: int64(len(bin)), Mode: 0o555, ModTime: modTime, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := cli.CopyToContainer(ctx, helper, client.CopyToContainerOptions{DestinationPath: AgentDir, Content: &archive}); err != nil {
		return fmt.Errorf("write agent binary: %w", err)
	}
	var link bytes.Buffer
	tw = tar.NewWriter(&link)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: "fleetlift-agent", Linkname: tmp, Mode: 0o555, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := cli.CopyToContainer(ctx, helper, client.CopyToContainerOptions{DestinationPath: AgentDir, Content: &link}); err != nil {
		return fmt.Errorf("link agent binary: %w", err)
	}
	return nil
}

// readAgentBinary reads the agent binary out of the agent image's
// container.
func readAgentBinary(ctx context.Context, cli *client.Client, helper, binary string) ([]byte, time.Time, error) {
	src, err := cli.CopyFromContainer(ctx, helper, client.CopyFromContainerOptions{SourcePath: binary})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read %s: %w", binary, err)
	}
	defer src.Content.Close()
	tr := tar.NewReader(src.Content)
	hdr, err := tr.Next()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read %s: %w", binary, err)
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil, time.Time{}, fmt.Errorf("%s is not a regular file", binary)
	}
	bin, err := io.ReadAll(tr)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read %s: %w", binary, err)
	}
	return bin, hdr.ModTime, nil
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
