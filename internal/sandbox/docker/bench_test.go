package docker

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker/dockertest"
)

// BenchmarkProvision measures provision-to-agent-ready (Provision returns
// once the agent serves) against its floor, `docker run --rm IMAGE true`
// of the same image, and reports each one's p50 and p95. Run it with
// -benchtime=50x for the 50 sandboxes.
func BenchmarkProvision(b *testing.B) {
	cli := dockertest.Client(b)
	image, agent := dockertest.Images(b, cli)
	b.Run("docker-run-true", func(b *testing.B) {
		if _, err := exec.LookPath("docker"); err != nil {
			b.Fatalf("the floor is measured with the docker CLI: %v", err)
		}
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			if out, err := exec.Command("docker", "run", "--rm", "--network", "none", image, "true").CombinedOutput(); err != nil {
				b.Fatalf("docker run: %v\n%s", err, out)
			}
			took = append(took, time.Since(start))
		}
		report(b, took)
	})
	b.Run("provision-ready", func(b *testing.B) {
		p, err := New(Options{Client: cli, Image: image, AgentImage: agent, Scope: newScope(), StopGrace: stopGrace})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		ctx := context.Background()
		// The agent volume is filled once per engine, not per sandbox.
		if _, err := p.agentVolume(ctx); err != nil {
			b.Fatal(err)
		}
		var took []time.Duration
		i := 0
		for b.Loop() {
			id := fmt.Sprintf("bench-%d", i)
			i++
			start := time.Now()
			if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: id}); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
			b.StopTimer()
			if err := p.Cleanup(ctx, id); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		report(b, took)
	})
}

func report(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	pct := func(q float64) float64 {
		return float64(took[min(len(took)-1, int(q*float64(len(took))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
}

// BenchmarkPollStatus measures what the worker does every 100 ms while a
// task runs: read status.json from the sandbox.
func BenchmarkPollStatus(b *testing.B) {
	cli := dockertest.Client(b)
	image, agent := dockertest.Images(b, cli)
	p, err := New(Options{Client: cli, Image: image, AgentImage: agent, Scope: newScope(), StopGrace: stopGrace})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	id := "bench-poll"
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: id}); err != nil {
		b.Fatal(err)
	}
	defer p.Cleanup(ctx, id)
	if err := p.CopyTo(ctx, id, strings.NewReader(`{"phase":"executing"}`), ".fleetlift/status.json"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		rc, err := p.CopyFrom(ctx, id, ".fleetlift/status.json")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			b.Fatal(err)
		}
		rc.Close()
	}
}
