// Package gen writes generated campaign definitions for the benchmarks,
// shaped like a real campaigns repository's: varied repositories, some with
// explicit names and branches.
package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Campaigns writes files campaign definitions of repos repositories each
// into dir and returns their names.
func Campaigns(dir string, files, repos int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var names []string
	for i := range files {
		var b strings.Builder
		fmt.Fprintf(&b, "version: 1\nkind: Campaign\nid: campaign-%04d\ntitle: Campaign %d\n", i, i)
		fmt.Fprintf(&b, "template:\n  execution:\n    agentic:\n      prompt: |\n        Migrate logging in this repository to log/slog (%d).\n", i)
		b.WriteString("      verifiers:\n        - name: build\n          command: [go, build, ./...]\n        - name: test\n          command: [go, test, ./...]\n")
		fmt.Fprintf(&b, "  pull_request:\n    branch_prefix: auto/campaign-%d\n    title: Migrate to slog\n    labels: [automated]\n", i)
		b.WriteString("batch_size: 10\nmax_parallel: 4\nfailure:\n  threshold_percent: 20\nrepositories:\n")
		for j := range repos {
			fmt.Fprintf(&b, "  - url: https://github.com/acme/service-%d-%d.git\n", i, j)
			if j%5 == 0 {
				fmt.Fprintf(&b, "    branch: release/v%d\n    name: svc-%d-%d\n", j, i, j)
			}
		}
		name := fmt.Sprintf("campaign-%04d.yaml", i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}
