package gcpace

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// A program that imports gcpace runs at its percent from the start, and
// Restore gives it back the percent GOGC says (the jail and the spec
// worker that fleetlift's binary also serves run at that one).
func TestRestoreGivesBackGOGC(t *testing.T) {
	if os.Getenv("GCPACE_CHILD") != "" {
		before := debug.SetGCPercent(percent)
		Restore()
		after := debug.SetGCPercent(started)
		os.Stdout.WriteString(strconv.Itoa(before) + " " + strconv.Itoa(after) + "\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestoreGivesBackGOGC$")
	cmd.Env = append(os.Environ(), "GCPACE_CHILD=1", "GOGC=57")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) < 2 || got[0] != "400" || got[1] != "57" {
		t.Fatalf("started at, restored to: %q; want 400 then GOGC's 57", out)
	}
}
