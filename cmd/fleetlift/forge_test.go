package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// forgeRecorder stands in for a forge's API: it records every request
// and answers with its handler (404 when there is none).
type forgeRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []recordedRequest
}

type recordedRequest struct {
	method, path, authorization string
}

func startForgeRecorder(t *testing.T, h http.HandlerFunc) *forgeRecorder {
	t.Helper()
	f := &forgeRecorder{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, recordedRequest{r.Method, r.URL.Path, r.Header.Get("Authorization")})
		f.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *forgeRecorder) requests() []recordedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedRequest(nil), f.seen...)
}

// tokenCampaignsRepo makes a campaigns repository whose config ends with
// forge (its forge section, from line 7): approvers are a team, so that
// reading the approval record robin committed asks the forge whether
// robin is in it, with the forge's token.
func tokenCampaignsRepo(t *testing.T, forge string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "campaigns")
	gitIn(t, filepath.Dir(dir), "init", "-q", "-b", "main", dir)
	writeFile(t, dir, "fleetlift.yaml", `version: 1
kind: Config
watch: {branch: main, path: campaigns, require_reviewed_merge: false}
approvers:
  - path: "campaigns/**"
    teams: [acme/platform]
`+forge)
	writeFile(t, dir, "campaigns/slog.yaml", `version: 1
kind: Campaign
id: slog
title: Structured logging
suspend: true
template:
  execution:
    agentic:
      prompt: Use log/slog.
  pull_request: {branch_prefix: auto/slog, title: Use slog}
repositories:
  - url: https://github.com/acme/payments.git
`)
	gitIn(t, dir, "add", ".")
	gitIn(t, dir, "-c", "user.name=alice", "-c", "user.email=alice@example.com", "commit", "-q", "-m", "Add slog")
	writeFile(t, dir, "approvals/slog.yaml", "version: 1\nkind: Approval\ntarget: slog\naction: approve\nresult_digest: "+tokenTestDigest+"\nby: robin\n")
	gitIn(t, dir, "add", ".")
	gitIn(t, dir, "-c", "user.name=robin", "-c", "user.email=robin@example.com", "commit", "-q", "-m", "Approve slog")
	return dir
}

const tokenTestDigest = "sha256:9f2c4e1a7b3d5f60182a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d"

// TestRepoConfigCannotChooseWhereTheTokenGoes: a commit to the campaigns
// repository's fleetlift.yaml naming another forge URL, or the variable
// a token is read from, never makes fleetlift send a token anywhere: the
// reconciler, `plan --comment-on` and `approve --git --pull-request`
// refuse with an error naming the file, the line and the field, and talk
// to no forge. The forge the operator allows still gets its requests,
// with the operator's token.
func TestRepoConfigCannotChooseWhereTheTokenGoes(t *testing.T) {
	userGitEnv(t)
	const operatorToken, secret = "operator-canary-3f9a1c07", "secret-canary-7d2e4b51"
	t.Setenv("FLEETLIFT_FORGE_TOKEN", operatorToken)
	t.Setenv("FLEETLIFT_TEST_SECRET_ACCESS_KEY", secret)
	// attacker.example: answers nothing, and must hear nothing.
	attacker := startForgeRecorder(t, nil)
	// The operator's forge: robin is in acme/platform.
	operator := startForgeRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/api/v3/orgs/acme/teams/platform/memberships/robin" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"state":"active","role":"member"}`))
			return
		}
		http.NotFound(w, r)
	})
	// The operator allows its forge, as a deployment would, in the
	// environment.
	t.Setenv("FLEETLIFT_FORGE_TYPE", "github")
	t.Setenv("FLEETLIFT_FORGE_URL", operator.URL+"/api/v3/")
	// The commands use the server's state directory: its credential.
	stateDir := filepath.Join(t.TempDir(), "temporal")
	addr, _, _ := serverForTest(t, stateDir)

	refused := []struct {
		name, forge, want string
	}{{
		name:  "a url and a token variable",
		forge: "forge:\n  type: github\n  url: " + attacker.URL + "/api/v3/\n  token_env: FLEETLIFT_TEST_SECRET_ACCESS_KEY\n",
		want:  "fleetlift.yaml:10:3: forge.token_env: the repository cannot choose the forge token's variable",
	}, {
		name:  "a url the operator did not allow",
		forge: "forge:\n  type: github\n  url: " + attacker.URL + "/api/v3/\n",
		want:  `fleetlift.yaml:9:3: forge.url: "` + attacker.URL + `/api/v3/" is not a forge the operator allows`,
	}}
	check := func(t *testing.T, what, out string, code int, want string) {
		t.Helper()
		if code == 0 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, want an error saying %q:\n%s", what, code, want, out)
		}
		if strings.Contains(out, operatorToken) || strings.Contains(out, secret) {
			t.Errorf("%s: the output holds a token:\n%s", what, out)
		}
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			repo := tokenCampaignsRepo(t, tc.forge)
			out, code := runCLI(t, "reconcile", "--once", "--repo", repo, "--temporal-address", addr, "--no-status", "--state-dir", stateDir)
			check(t, "reconcile", out, code, tc.want)

			out, code = runCLI(t, "plan", "--repo", repo, "--state", "none", "--comment-on", "1", "--state-dir", stateDir)
			check(t, "plan --comment-on", out, code, tc.want)

			work := filepath.Join(t.TempDir(), "work")
			gitIn(t, filepath.Dir(work), "clone", "-q", repo, work)
			gitIn(t, work, "config", "user.name", "robin")
			gitIn(t, work, "config", "user.email", "robin@example.com")
			out, code = runCLI(t, "approve", "--git", work, "--by", "robin", "--pull-request", "--target", "slog", "--digest", tokenTestDigest)
			check(t, "approve --git --pull-request", out, code, tc.want)
		})
	}
	if got := attacker.requests(); len(got) > 0 {
		t.Errorf("fleetlift talked to the forge the repository named: %+v", got)
	}

	t.Run("the operator's forge", func(t *testing.T) {
		repo := tokenCampaignsRepo(t, "forge:\n  type: github\n  url: "+operator.URL+"/api/v3\n")
		out, _ := runCLI(t, "reconcile", "--once", "--repo", repo, "--temporal-address", addr, "--no-status", "--state-dir", stateDir)
		asked := false
		for _, r := range operator.requests() {
			if r.authorization != "Bearer "+operatorToken {
				t.Errorf("%s %s carried %q, want the operator's token", r.method, r.path, r.authorization)
			}
			asked = asked || r.path == "/api/v3/orgs/acme/teams/platform/memberships/robin"
		}
		if !asked {
			t.Errorf("the reconciler did not ask the operator's forge about robin's team:\n%s", out)
		}
		if strings.Contains(out, "forge.") || strings.Contains(out, operatorToken) {
			t.Errorf("the reconciler complains about the forge, or shows its token:\n%s", out)
		}
	})
	if got := attacker.requests(); len(got) > 0 {
		t.Errorf("fleetlift talked to the forge the repository named: %+v", got)
	}
}
