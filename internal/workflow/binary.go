package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime/debug"

	"go.temporal.io/sdk/worker"
)

// IdentifyBinary names this executable to Temporal: the binary checksum
// workers record with their workflow tasks, which a reset by bad binary
// goes by. The SDK's default reads and hashes the whole executable when
// the first worker starts, a third of a second of CPU for a binary that
// links the Temporal server; this names it by its build information (the
// module, its dependencies, the VCS revision) and the file's size and
// modification time instead. Call it before the first worker starts (the
// embedded server starts its own).
func IdentifyBinary() {
	h := sha256.New()
	if bi, ok := debug.ReadBuildInfo(); ok {
		fmt.Fprint(h, bi.String())
	}
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			fmt.Fprintf(h, "\n%s %d %d", exe, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	worker.SetBinaryChecksum("fleetlift-" + hex.EncodeToString(h.Sum(nil))[:24])
}
