package devserver_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"
	_ "modernc.org/sqlite"

	"github.com/fleetlift/fleetlift/internal/devserver"
)

// firstStart is the test binary run as `<exe> first-start DB STEP`: a
// first start of the server on DB that kills itself at STEP of making
// the database. It returns (exit code 3) only when it never got there.
func firstStart(db, step string) int {
	srv, err := devserver.Start(devserver.KillAt(devserver.Options{DatabaseFile: db}, step))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	srv.Stop()
	fmt.Fprintf(os.Stderr, "the start never reached step %q\n", step)
	return 3
}

// TestFirstStartKilledMidwayStartsAgain: a first start (fresh state
// directory) killed with SIGKILL at any point while it makes the
// database — after the first schema statements, midway, between the
// main and the visibility schema, after the last, around the rename,
// before the namespace — leaves a state directory
// the next start serves from, with nothing of the killed build left.
func TestFirstStartKilledMidwayStartsAgain(t *testing.T) {
	steps, err := devserver.BuildSteps(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// A first start writes the schema template; it runs no statement.
	if !slices.Contains(steps, "schema template written") {
		t.Errorf("a first start does not write the schema template: %q", steps)
	}
	for _, step := range killPoints(steps) {
		t.Run(step, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "state", "temporal.db")
			out, err := exec.Command(os.Args[0], "first-start", db, step).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the first start was not killed at %q: %v\n%s", step, err, out)
			}
			srv, err := devserver.Start(devserver.Options{DatabaseFile: db})
			if err != nil {
				t.Fatalf("start after a first start killed at %q: %v", step, err)
			}
			t.Cleanup(srv.Stop)
			checkServes(t, srv, "after-kill")
			if left, _ := filepath.Glob(db + ".tmp-*"); len(left) > 0 {
				t.Errorf("the killed build's files are still there: %v", left)
			}
		})
	}
}

// killPoints are the steps a first start is killed at: the first two
// schema statements, a quarter, half and three quarters of the way, the
// last of the main schema (before the visibility table: killed there, the
// old `up` ran on and failed every pass), the last one, and every step
// after.
func killPoints(steps []string) []string {
	var statements, after []string
	mainEnd := -1
	for _, s := range steps {
		if strings.HasPrefix(s, "statement ") {
			if strings.HasSuffix(s, ": CREATE TABLE executions_visibility") {
				mainEnd = len(statements) - 1
			}
			statements = append(statements, s)
		} else {
			after = append(after, s)
		}
	}
	n := len(statements)
	var points []string
	seen := map[string]bool{}
	for _, i := range []int{0, 1, n / 4, mainEnd, n / 2, 3 * n / 4, n - 1} {
		if i >= 0 && i < n && !seen[statements[i]] {
			seen[statements[i]] = true
			points = append(points, statements[i])
		}
	}
	return append(append(points, after...), "namespace ready")
}

// TestDatabaseRepairedAtStart: what a start can put right without losing
// anything it does, says so, and the server then serves fleetlift's
// runs with all of its search attributes.
func TestDatabaseRepairedAtStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		make   func(t *testing.T, db string)
		repair string
	}{
		{"schema without the namespace", func(t *testing.T, db string) {
			mustDo(t, devserver.CreateSchema(db))
		}, "created namespace default"},
		{"namespace without fleetlift's newer search attributes", func(t *testing.T, db string) {
			mustDo(t, devserver.CreateSchema(db))
			mustDo(t, devserver.CreateNamespace(db, map[string]enumspb.IndexedValueType{"FleetliftKind": enumspb.INDEXED_VALUE_TYPE_KEYWORD}))
		}, "added search attributes [FleetliftCampaign FleetliftID FleetliftPhase FleetliftSpecDigest]"},
		{"left by an earlier fleetlift killed after two statements", func(t *testing.T, db string) {
			// The namespace_metadata table is there, its initial row not.
			mustDo(t, devserver.CreateUnfinished(db, 2))
		}, "lacked table activity_info_maps"},
		{"left by an earlier fleetlift killed before the visibility schema", func(t *testing.T, db string) {
			mustDo(t, devserver.CreateUnfinished(db, 38))
		}, "lacked table executions_visibility"},
		{"served by an earlier fleetlift without its visibility table, no runs of fleetlift's", func(t *testing.T, db string) {
			// The old `up` ran on such a database, every pass failing;
			// the server's own system workflows are recorded in it.
			srv, err := devserver.Start(devserver.Options{DatabaseFile: db})
			mustDo(t, err)
			srv.Stop()
			sqlExec(t, db, "DROP TABLE executions_visibility")
		}, "lacked table executions_visibility"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "temporal.db")
			tc.make(t, db)
			srv, err := devserver.Start(devserver.Options{DatabaseFile: db})
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			t.Cleanup(srv.Stop)
			if got := strings.Join(srv.Repairs(), "\n"); !strings.Contains(got, tc.repair) || !strings.Contains(got, db+": ") {
				t.Errorf("repairs %q, want one on %s saying %q", got, db, tc.repair)
			}
			checkServes(t, srv, "repaired")
		})
	}
}

// TestDatabaseRefused: a database a start cannot complete without
// losing runs, or does not understand, is refused with an error that
// names the file, what is wrong and what to do, and is left as it was.
func TestDatabaseRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, db string)
		want []string
	}{
		{"a table missing, runs recorded", func(t *testing.T, db string) {
			srv, err := devserver.Start(devserver.Options{DatabaseFile: db})
			mustDo(t, err)
			checkServes(t, srv, "recorded")
			srv.Stop()
			sqlExec(t, db, "DROP TABLE executions_visibility")
		}, []string{"lacks table executions_visibility", "holds runs", "restore it from a backup", "move it aside"}},
		{"runs recorded, their namespace missing", func(t *testing.T, db string) {
			srv, err := devserver.Start(devserver.Options{DatabaseFile: db})
			mustDo(t, err)
			checkServes(t, srv, "recorded")
			srv.Stop()
			sqlExec(t, db, "DELETE FROM namespaces")
		}, []string{"holds runs but not their namespace default", "restore it from a backup", "move it aside"}},
		{"a newer Temporal schema", func(t *testing.T, db string) {
			mustDo(t, devserver.CreateSchema(db))
			sqlExec(t, db, "UPDATE schema_version SET curr_version = '9.1' WHERE db_name = 'temporal'")
		}, []string{"Temporal schema temporal 9.1, newer than", "a newer one"}},
		{"not a database", func(t *testing.T, db string) {
			mustDo(t, os.WriteFile(db, []byte(strings.Repeat("not sqlite\n", 1000)), 0o600))
		}, []string{"not a database", "move it aside"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "temporal.db")
			tc.make(t, db)
			before := runRows(t, db)
			srv, err := devserver.Start(devserver.Options{DatabaseFile: db})
			if err == nil {
				srv.Stop()
				t.Fatal("started")
			}
			for _, w := range append(tc.want, db) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if after := runRows(t, db); after != before {
				t.Errorf("runs recorded: %d before the start, %d after", before, after)
			}
		})
	}
}

// TestServerThatCannotServeFailsStart: a database whose catalogue is
// whole but whose visibility records cannot be read (damaged pages) lets
// the server start, but not serve: the start fails with the server's
// own error and the file, instead of every later request failing.
func TestServerThatCannotServeFailsStart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "temporal.db")
	mustDo(t, devserver.CreateSchema(db))
	mustDo(t, devserver.CreateNamespace(db, devserver.SearchAttributes))
	damage(t, db, "executions_visibility")
	srv, err := devserver.Start(devserver.Options{DatabaseFile: db})
	if err == nil {
		srv.Stop()
		t.Fatal("started")
	}
	for _, w := range []string{"cannot serve", "list workflows", "malformed", db} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}

// checkServes runs a workflow with fleetlift's search attributes to its
// end on srv and finds it by one of them, as fleetlift's state reader
// finds runs.
func checkServes(t *testing.T, srv *devserver.Server, phase string) {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := worker.New(c, "check", worker.Options{})
	w.RegisterWorkflowWithOptions(func(sdkworkflow.Context) (string, error) { return "served", nil }, sdkworkflow.RegisterOptions{Name: "Check"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	id := "check-" + phase
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "check",
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword("FleetliftKind").ValueSet("check"),
			temporal.NewSearchAttributeKeyKeyword("FleetliftPhase").ValueSet(phase))}, "Check")
	if err != nil {
		t.Fatalf("start a workflow: %v", err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "served" {
		t.Fatalf("workflow result %q, %v", got, err)
	}
	// Visibility records are written after the run, by the server's own
	// tasks: look until the run is listed.
	query := fmt.Sprintf("FleetliftPhase = %q", phase)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: devserver.Namespace, Query: query})
		if err != nil {
			t.Fatalf("list workflows where %s: %v", query, err)
		}
		if len(resp.Executions) == 1 && resp.Executions[0].Execution.WorkflowId == id {
			return
		}
	}
	t.Fatalf("workflow %s never listed where %s", id, query)
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sqlExec runs statements on the SQLite file db, as a person repairing
// it by hand would.
func sqlExec(t *testing.T, db string, stmts ...string) {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	mustDo(t, err)
	defer conn.Close()
	for _, s := range stmts {
		if _, err := conn.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// runRows counts the rows of db's executions table (-1: none to count).
func runRows(t *testing.T, db string) int {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	mustDo(t, err)
	defer conn.Close()
	n := -1
	if err := conn.QueryRow("SELECT COUNT(*) FROM executions").Scan(&n); err != nil {
		return -1
	}
	return n
}

// damage overwrites the root pages of table and its indexes with
// zeroes, as a failing disk might, leaving the catalogue whole.
func damage(t *testing.T, db, table string) {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	mustDo(t, err)
	var pageSize int64
	mustDo(t, conn.QueryRow("PRAGMA page_size").Scan(&pageSize))
	rows, err := conn.Query("SELECT rootpage FROM sqlite_master WHERE tbl_name = ? AND rootpage > 0", table)
	mustDo(t, err)
	var pages []int64
	for rows.Next() {
		var p int64
		mustDo(t, rows.Scan(&p))
		pages = append(pages, p)
	}
	mustDo(t, rows.Err())
	rows.Close()
	mustDo(t, conn.Close())
	f, err := os.OpenFile(db, os.O_WRONLY, 0)
	mustDo(t, err)
	defer f.Close()
	for _, p := range pages {
		if _, err := f.WriteAt(make([]byte, pageSize), (p-1)*pageSize); err != nil {
			t.Fatal(err)
		}
	}
}
