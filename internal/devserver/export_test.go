package devserver

import (
	"database/sql"
	"errors"
	"os"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteschema "go.temporal.io/server/schema/sqlite"
)

// KillAt returns opts for a start that kills its own process (SIGKILL on
// Unix) on reaching step of preparing the database: a step of BuildSteps,
// or "namespace ready".
func KillAt(opts Options, step string) Options {
	opts.step = func(s string) {
		if s == step {
			self, _ := os.FindProcess(os.Getpid())
			self.Kill()
			select {}
		}
	}
	return opts
}

// BuildSteps lists, in order, the steps of building a database, by
// building one in dir.
func BuildSteps(dir string) ([]string, error) {
	var steps []string
	err := build(dir+"/temporal.db", func(s string) { steps = append(steps, s) })
	return steps, err
}

// CreateSchema makes path a database with the whole schema and nothing
// else: what a first start killed after renaming it into place leaves.
func CreateSchema(path string) error { return build(path, nil) }

// CreateNamespace registers fleetlift's namespace in the database at
// path with the search attributes attrs only, as an earlier fleetlift
// with fewer attributes would have.
func CreateNamespace(path string, attrs map[string]enumspb.IndexedValueType) error {
	_, err := ensureNamespace(sqlConfig(path), attrs)
	return err
}

// CreateUnfinished makes path what a first start of fleetlift before
// the database was built whole left when killed after the first n
// statements of the schema: those statements, each committed on its own,
// in the file itself.
func CreateUnfinished(path string, n int) error {
	db, err := openDatabase(path, "journal_mode(wal)")
	if err != nil {
		return err
	}
	defer db.Close()
	err = sqliteschema.SetupSchemaOnDB(&prefixDB{db: db, left: n})
	if errors.Is(err, errEnough) {
		return nil
	}
	return err
}

var errEnough = errors.New("enough statements")

// prefixDB runs schema statements until it has run its share.
type prefixDB struct {
	sqlplugin.AdminDB
	db   *sql.DB
	left int
}

func (p *prefixDB) Exec(stmt string, args ...any) error {
	if p.left == 0 {
		return errEnough
	}
	p.left--
	_, err := p.db.Exec(stmt, args...)
	return err
}
