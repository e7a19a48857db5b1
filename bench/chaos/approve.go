package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/state"
)

// approvals is the harness acting as the approver, as the round calls
// for: each result that awaits approval is approved once, by committing
// an approval record to the campaigns repository with
// `fleetlift approve <campaign> --repository <unit> --git <campaigns> --by robin`,
// as robin.
type approvals struct {
	bin  string
	fx   *fixture
	addr string
	// done maps each approved target to the digests approved for it.
	done map[string][]string
	// made counts the records committed.
	made int
}

// next approves one result awaiting approval that has not been approved
// yet, if there is one. A result approved before that awaits approval
// again is left alone: approving it a second time would be a human
// repairing what a crash lost. A new digest for a target approved before
// is a new decision (its record replaces the old one, with --force).
func (a *approvals) next(ctx context.Context, pending []state.PendingApproval) (string, error) {
	for _, p := range pending {
		if slices.Contains(a.done[p.Target], p.ResultDigest) {
			continue
		}
		_, unit, ok := strings.Cut(p.Target, "/")
		if !ok {
			return "", fmt.Errorf("pending approval for %q: not a campaign's unit", p.Target)
		}
		args := []string{"approve", campaignID, "--repository", unit,
			"--git", a.fx.campaigns, "--by", approver,
			"--state-dir", a.fx.state, "--temporal-address", a.addr}
		if len(a.done[p.Target]) > 0 {
			args = append(args, "--force")
		}
		cmd := exec.CommandContext(ctx, filepath.Join(a.bin, "fleetlift"), args...)
		cmd.Env = append(gitEnv(cleanEnv(os.Environ())), identity(approver)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("fleetlift %s: %v: %s", strings.Join(args[:4], " "), err, oneLine(out.String(), 300))
		}
		digest, err := a.recorded(p.Target)
		if err != nil {
			return "", err
		}
		if a.done == nil {
			a.done = map[string][]string{}
		}
		a.done[p.Target] = append(a.done[p.Target], digest)
		a.made++
		return fmt.Sprintf("approved %s (%.19s)", p.Target, digest), nil
	}
	return "", nil
}

// recorded reads the digest the approval record of target names, as
// `approve --git` wrote it.
func (a *approvals) recorded(target string) (string, error) {
	path := filepath.Join(a.fx.campaigns, "approvals", approval.PathName(target)+".yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the approval record: %w", err)
	}
	var rec struct {
		Action       string `yaml:"action"`
		ResultDigest string `yaml:"result_digest"`
	}
	if err := yaml.Unmarshal(b, &rec); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if rec.Action != "approve" || rec.ResultDigest == "" {
		return "", fmt.Errorf("%s is not an approval of a result", path)
	}
	return rec.ResultDigest, nil
}

// units lists the units approved at least once.
func (a *approvals) units() []string {
	var out []string
	for target := range a.done {
		if _, unit, ok := strings.Cut(target, "/"); ok {
			out = append(out, unit)
		}
	}
	slices.Sort(out)
	return out
}
