package devserver

import "os"

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
// else, as a first start does before it registers the namespace.
func CreateSchema(path string) error { return build(path, nil) }
