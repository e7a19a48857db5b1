package main

import (
	"context"
	"database/sql"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	_ "modernc.org/sqlite"

	"github.com/fleetlift/fleetlift/internal/demo"
	"github.com/fleetlift/fleetlift/internal/devserver"
)

// TestUpStopsOnDatabaseItCannotUse: `fleetlift up` on a state directory
// whose database lacks its visibility table while holding runs exits
// non-zero, before it reconciles, with the server's error naming the
// table, the file and what to do — where it used to run on with every
// pass failing ("no such table: executions_visibility").
func TestUpStopsOnDatabaseItCannotUse(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	campaigns := filepath.Join(root, "campaigns")
	if err := demo.CampaignsRepo(ctx, campaigns); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(root, "state")
	db := filepath.Join(state, "temporal.db")
	addr := freeAddr(t)
	recordRun(t, addr, state)
	sqlExec(t, db, "DROP TABLE executions_visibility")

	up := startUp(t, "--repo", campaigns, "--temporal-address", addr, "--state-dir", state, "--interval", "1s")
	var code int
	for waiting := true; waiting; {
		select {
		case code = <-up.done:
			up.done <- code // for the cleanup's stop
			waiting = false
		case <-time.After(50 * time.Millisecond):
			if out := up.out.String(); strings.Contains(out, "reconciling ") {
				t.Fatalf("up reconciles on a database it cannot use:\n%s", out)
			}
		}
	}
	out := up.out.String()
	if code == 0 {
		t.Fatalf("up exited 0:\n%s", out)
	}
	for _, w := range []string{db, "cannot serve", "no such table: executions_visibility", "restore it from a backup", "move it aside"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// sqlExec runs statements on the SQLite file db, as a person repairing
// it by hand would.
func sqlExec(t *testing.T, db string, stmts ...string) {
	t.Helper()
	// A server just stopped may still finish a write (its services'
	// queues outlive Stop by a moment): wait for it, as the server's own
	// connections do, rather than fail at once with SQLITE_BUSY.
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, s := range stmts {
		if _, err := conn.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// recordRun starts the embedded server on state, starts a workflow there
// (no worker runs it: it is recorded, which is what counts) and stops it.
func recordRun(t *testing.T, addr, state string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	srv, err := devserver.Start(devserver.Options{DatabaseFile: filepath.Join(state, "temporal.db"), TLSDir: credentialDir(state), IP: host, Port: p})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "recorded", TaskQueue: "nobody"}, "Recorded"); err != nil {
		t.Fatal(err)
	}
}
