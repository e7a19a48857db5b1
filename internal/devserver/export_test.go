package devserver

import (
	"os"

	enumspb "go.temporal.io/api/enums/v1"
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
