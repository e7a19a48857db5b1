// Command sandbox measures how long a Docker sandbox takes to be ready:
// provision-to-agent-ready through fleetlift's Docker provider (container
// created and started, workspace and home made the agent's, the agent
// running), against the floor of `docker run --rm --network none
// --entrypoint true IMAGE` of the same image in the same run, in alternating order. It prints
// p50 and p95 of each and the ratio of the p50s (goal: at most 1.3).
//
//	go run ./bench/sandbox -n 50
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker"
)

func main() {
	n := flag.Int("n", 50, "sandboxes to provision (and docker runs of the floor)")
	image := flag.String("image", docker.DefaultImage, "the sandbox image (make images builds it)")
	agent := flag.String("agent-image", docker.DefaultAgentImage, "the agent image (make images builds it)")
	dockerCLI := flag.String("docker", "docker", "the docker CLI the floor is measured with")
	flag.Parse()
	if err := run(*n, *image, *agent, *dockerCLI); err != nil {
		fmt.Fprintln(os.Stderr, "bench-sandbox:", err)
		os.Exit(1)
	}
}

func run(n int, image, agent, dockerCLI string) error {
	ctx := context.Background()
	p, err := docker.New(docker.Options{Image: image, AgentImage: agent, Scope: fmt.Sprintf("bench-%d", os.Getpid())})
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.Check(ctx); err != nil {
		return fmt.Errorf("%w: start a Docker engine and run `make images`", err)
	}
	// One sandbox first: the agent volume is filled once per engine, not
	// per sandbox.
	provision := func(id string) (time.Duration, error) {
		start := time.Now()
		if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: id}); err != nil {
			return 0, err
		}
		took := time.Since(start)
		return took, p.Cleanup(ctx, id)
	}
	if _, err := provision("warm-up"); err != nil {
		return err
	}
	floor := func() (time.Duration, error) {
		start := time.Now()
		if out, err := exec.Command(dockerCLI, "run", "--rm", "--network", "none", "--entrypoint", "true", image).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("docker run: %v: %s", err, out)
		}
		return time.Since(start), nil
	}
	var ready, base []time.Duration
	for i := range n {
		b, err := floor()
		if err != nil {
			return err
		}
		r, err := provision(fmt.Sprintf("bench-%d", i))
		if err != nil {
			return err
		}
		base, ready = append(base, b), append(ready, r)
	}
	p50r, p95r := percentiles(ready)
	p50b, p95b := percentiles(base)
	fmt.Printf("provision to agent ready   p50 %6.0f ms   p95 %6.0f ms   (%d sandboxes)\n", ms(p50r), ms(p95r), n)
	fmt.Printf("docker run --rm IMAGE true p50 %6.0f ms   p95 %6.0f ms   (the floor, same image, same run)\n", ms(p50b), ms(p95b))
	fmt.Printf("ratio of the p50s: %.2fx (goal: at most 1.3x)\n", float64(p50r)/float64(p50b))
	return nil
}

func percentiles(ds []time.Duration) (p50, p95 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.5), at(0.95)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
