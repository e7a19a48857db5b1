package jail

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ProgramName is the name of Main as a program of its own
// (cmd/fleetlift-jail), which starts faster than a larger program's jail
// command.
const ProgramName = "fleetlift-jail"

// Program returns the path of the fleetlift-jail in dir when there is one
// that speaks this build's Protocol, "" otherwise: a missing one, one left
// from another build or one that cannot be run leaves the caller on its
// own jail command.
func Program(dir string) string {
	p := filepath.Join(dir, ProgramName)
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return ""
	}
	out, err := exec.Command(p, flagProtocol).Output()
	if err != nil || strings.TrimSpace(string(out)) != Protocol {
		return ""
	}
	return p
}
