package spec_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/fleetlift/fleetlift/internal/spec"
)

// FuzzLoad feeds arbitrary bytes to the loader as a YAML and as a CUE
// file. Whatever the input, loading returns (never panics or hangs past
// its limit), every error names its file and line, and every definition
// it accepts has an id and a digest that do not change on a second load.
func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"../../examples", "../../testdata/invalid"} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			// The runaway-evaluation cases only ever meet the timeout;
			// TestPool* and TestInvalidInputs cover them.
			if strings.Contains(p, "/cue-exponential-string/") || strings.Contains(p, "/cue-nested-comprehension/") {
				return nil
			}
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".cue")) {
				if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
					f.Add(b, strings.HasSuffix(p, ".cue"))
				}
			}
			return nil
		})
	}
	f.Add([]byte(agenticTask), false)
	// CUE inputs are programs: a mutation can make one that never ends,
	// so they run in a worker pool, as in fleetlift itself.
	loader := &spec.Loader{Eval: newPool(f), Limits: spec.Limits{EvalTimeout: time.Second, MaxFileBytes: 64 << 10}}
	f.Fuzz(func(t *testing.T, data []byte, isCUE bool) {
		name := "f.yaml"
		if isCUE {
			name = "f.cue"
		}
		fsys := fstest.MapFS{name: {Data: data}}
		res, err := loader.Load(context.Background(), fsys, ".")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Errors {
			if e.File != name || e.Line < 1 || e.Msg == "" {
				t.Fatalf("error without file, line or message: %+v", e)
			}
		}
		for _, d := range res.Definitions {
			if d.ID == "" || !strings.HasPrefix(d.Digest, "sha256:") {
				t.Fatalf("definition without id or digest: %+v", d)
			}
			again, err := loader.Load(context.Background(), fsys, ".")
			if err != nil || len(again.Definitions) != 1 || again.Definitions[0].Digest != d.Digest {
				t.Fatalf("second load differs: %v %+v", err, again)
			}
		}
	})
}
