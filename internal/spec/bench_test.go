package spec_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/spec"
)

func campaignFS(files, repos int) fstest.MapFS {
	fsys := fstest.MapFS{}
	for i := range files {
		var b strings.Builder
		fmt.Fprintf(&b, "version: 1\nkind: Campaign\nid: campaign-%04d\ntitle: Campaign %d\n", i, i)
		b.WriteString("template:\n  execution:\n    agentic:\n      prompt: migrate\n      verifiers:\n        - name: build\n          command: [go, build, ./...]\n")
		fmt.Fprintf(&b, "  pull_request:\n    branch_prefix: auto/c-%d\n    title: Migrate\nrepositories:\n", i)
		for j := range repos {
			fmt.Fprintf(&b, "  - url: https://github.com/acme/service-%d-%d.git\n", i, j)
		}
		fsys[fmt.Sprintf("c%04d.yaml", i)] = &fstest.MapFile{Data: []byte(b.String())}
	}
	return fsys
}

// BenchmarkLoad measures one campaign of 25 repositories through the
// in-process evaluator on one goroutine per CPU.
func BenchmarkLoad(b *testing.B) {
	fsys := campaignFS(b.N, 25)
	loader := &spec.Loader{Eval: spec.InProcess(0)}
	b.ResetTimer()
	res, err := loader.Load(context.Background(), fsys, ".")
	if err != nil || len(res.Errors) > 0 {
		b.Fatal(err, res.Errors)
	}
}

// BenchmarkLoadPool measures the same through a pool of two worker
// processes, as fleetlift validate runs.
func BenchmarkLoadPool(b *testing.B) {
	fsys := campaignFS(b.N, 25)
	pool := newPool(b)
	pool.MemoryLimit = 0
	loader := &spec.Loader{Eval: pool}
	b.ResetTimer()
	res, err := loader.Load(context.Background(), fsys, ".")
	if err != nil || len(res.Errors) > 0 {
		b.Fatal(err, res.Errors)
	}
}
