package gcpace

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// A program runs at the percent GOGC says until it calls Set, and at
// Percent after: importing gcpace alone changes nothing (the jail and
// the spec worker that fleetlift's binary also serves never call it).
func TestSetAfterGOGC(t *testing.T) {
	if os.Getenv("GCPACE_CHILD") != "" {
		imported := debug.SetGCPercent(-1)
		debug.SetGCPercent(imported)
		before := Set()
		after := debug.SetGCPercent(imported)
		os.Stdout.WriteString(strconv.Itoa(imported) + " " + strconv.Itoa(before) + " " + strconv.Itoa(after) + "\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSetAfterGOGC$")
	cmd.Env = append(os.Environ(), "GCPACE_CHILD=1", "GOGC=57")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) < 3 || got[0] != "57" || got[1] != "57" || got[2] != "400" {
		t.Fatalf("percent once imported, before Set, after Set: %q; want GOGC's 57, 57, then 400", out)
	}
}
