package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/fleetlift/fleetlift/internal/sandbox/docker"
)

// Sandbox providers -sandbox names.
const (
	sandboxLocal  = "local"
	sandboxDocker = "docker"
)

// engine is the Docker engine of a -sandbox docker run: up's sandboxes
// are containers of the round's label scope there, and a kill of "the
// agents" or of "the whole tree" kills them (a host that lost its
// containers), found by that label, never anything else of the engine.
type engine struct {
	cli *client.Client
}

// dialEngine connects to the engine DOCKER_HOST names and checks that it
// has the sandbox image and the static agent the run injects.
func dialEngine(ctx context.Context, image string) (*engine, error) {
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("-sandbox docker: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("-sandbox docker: no engine answers (start one: sudo dockerd &): %w", err)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		cli.Close()
		return nil, fmt.Errorf("-sandbox docker: image %s: %w (make images builds it)", image, err)
	}
	return &engine{cli: cli}, nil
}

func (e *engine) Close() error { return e.cli.Close() }

// scopeOf is the label scope of a round's sandboxes: its mode and seed,
// so that rounds never see each other's containers.
func scopeOf(m Mode, seed uint64) string {
	return "chaos-" + m.String() + "-" + strconv.FormatUint(seed, 10)
}

// containers lists the scope's containers, running or not.
func (e *engine) containers(ctx context.Context, scope string, running bool) ([]string, error) {
	list, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: !running, Filters: client.Filters{}.Add("label", docker.LabelScope+"="+scope)})
	if err != nil {
		return nil, fmt.Errorf("list the containers of scope %s: %w", scope, err)
	}
	ids := make([]string, 0, len(list.Items))
	for _, c := range list.Items {
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// kill kills the scope's running containers (SIGKILL to their PID 1, the
// agent, which takes everything in the container with it) and says how
// many.
func (e *engine) kill(ctx context.Context, scope string) (int, error) {
	ids, err := e.containers(ctx, scope, true)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if _, err := e.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err == nil {
			n++
		} else if !strings.Contains(err.Error(), "is not running") && !strings.Contains(strings.ToLower(err.Error()), "no such container") {
			return n, fmt.Errorf("kill container %.12s: %w", id, err)
		}
	}
	return n, nil
}

// remove removes the scope's containers and volumes, what a round leaves.
func (e *engine) remove(ctx context.Context, scope string) (int, error) {
	ids, err := e.containers(ctx, scope, false)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		if _, err := e.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !strings.Contains(strings.ToLower(err.Error()), "no such container") {
			return 0, fmt.Errorf("remove container %.12s: %w", id, err)
		}
	}
	vols, err := e.cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", docker.LabelScope+"="+scope)})
	if err != nil {
		return len(ids), err
	}
	for _, v := range vols.Items {
		_, _ = e.cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
	}
	return len(ids), nil
}

// waitRunning waits (bounded) until the scope has a running container.
func (e *engine) waitRunning(ctx context.Context, scope string, d time.Duration) (bool, error) {
	for deadline := time.Now().Add(d); ; {
		ids, err := e.containers(ctx, scope, true)
		if err != nil || len(ids) > 0 {
			return len(ids) > 0, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// handOver makes dir's files the sandbox user's (uid 1000 in the
// containers), so that agents there can push to the target repositories.
func handOver(ctx context.Context, dir string) error {
	out, err := exec.CommandContext(ctx, "chown", "-R", fmt.Sprintf("%d:%d", docker.UID, docker.GID), dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chown %s: %v: %s", dir, err, out)
	}
	return nil
}
