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
// database — at the first schema statements, midway, at the last, after
// the commit, around the rename, before the namespace — leaves a state
// directory the next start serves from, with fleetlift's namespace and
// search attributes and nothing of the killed build left.
func TestFirstStartKilledMidwayStartsAgain(t *testing.T) {
	steps, err := devserver.BuildSteps(t.TempDir())
	if err != nil {
		t.Fatal(err)
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
// schema statements, the middle one and the last one, every step after
// them, and the namespace's registration.
func killPoints(steps []string) []string {
	var statements, after []string
	for _, s := range steps {
		if strings.HasPrefix(s, "statement ") {
			statements = append(statements, s)
		} else {
			after = append(after, s)
		}
	}
	var points []string
	if n := len(statements); n > 0 {
		for _, i := range []int{0, 1, n / 2, n - 1} {
			if i < n && !slices.Contains(points, statements[i]) {
				points = append(points, statements[i])
			}
		}
	}
	return append(append(points, after...), "namespace ready")
}

// TestRestartKeepsRuns: runs recorded by one server are there, with
// their results and search attributes, after it stops and another starts
// on the same database, and the new one runs workflows too.
func TestRestartKeepsRuns(t *testing.T) {
	db := filepath.Join(t.TempDir(), "temporal.db")
	srv, err := devserver.Start(devserver.Options{DatabaseFile: db})
	mustDo(t, err)
	checkServes(t, srv, "before-restart")
	srv.Stop()

	srv, err = devserver.Start(devserver.Options{DatabaseFile: db})
	mustDo(t, err)
	t.Cleanup(srv.Stop)
	c := dial(t, srv)
	var got string
	if err := c.GetWorkflow(context.Background(), "check-before-restart", "").Get(context.Background(), &got); err != nil || got != "served" {
		t.Fatalf("the run of the first server after a restart: %q, %v", got, err)
	}
	listed(t, c, "check-before-restart", `FleetliftPhase = "before-restart"`)
	checkServes(t, srv, "after-restart")
}

// TestSecondServerOnDatabaseRefused: while a server runs on a database,
// a second start on it (another port, as another `fleetlift server
// --state-dir` would) is refused with an error naming the file and the
// address the first serves at, and the first goes on serving; once the
// first stops, a start succeeds.
func TestSecondServerOnDatabaseRefused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "temporal.db")
	first, err := devserver.Start(devserver.Options{DatabaseFile: db})
	mustDo(t, err)
	second, err := devserver.Start(devserver.Options{DatabaseFile: db})
	if err == nil {
		second.Stop()
		first.Stop()
		t.Fatal("a second server started on the database the first uses")
	}
	for _, w := range []string{db, "in use by another fleetlift server", "at " + first.Address() + ": use it with --temporal-address " + first.Address()} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	checkServes(t, first, "first")
	first.Stop()
	after, err := devserver.Start(devserver.Options{DatabaseFile: db})
	if err != nil {
		t.Fatalf("start after the first server stopped: %v", err)
	}
	t.Cleanup(after.Stop)
	listed(t, dial(t, after), "check-first", `FleetliftPhase = "first"`)
}

// TestServerThatCannotServeFailsStart: a database whose catalogue is
// whole but whose visibility records cannot be read (damaged pages) lets
// the server start, but not serve: the start fails with the server's
// own error and the file, instead of every later request failing.
func TestServerThatCannotServeFailsStart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "temporal.db")
	mustDo(t, devserver.CreateSchema(db))
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
	c := dial(t, srv)
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
	listed(t, c, id, fmt.Sprintf("FleetliftPhase = %q", phase))
}

// dial connects to srv with the install's credential, until the test
// ends.
func dial(t *testing.T, srv *devserver.Server) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// listed waits until the run id is the one run listed where query holds.
// Visibility records are written after the run, by the server's own
// tasks.
func listed(t *testing.T, c client.Client, id, query string) {
	t.Helper()
	ctx := context.Background()
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
