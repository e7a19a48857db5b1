package devserver

import (
	"os"
	"path/filepath"
	"testing"
)

// A database is in use while a server holds its lock, and only then: a
// `fleetlift run` stands in for another's embedded server only on the
// database that server served.
func TestInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "temporal.db")
	if InUse(path) {
		t.Error("a database that is not there is in use")
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if InUse(path) {
		t.Error("a database no server holds is in use")
	}
	unlock, err := lockDatabase(path)
	if err != nil {
		t.Fatal(err)
	}
	if !InUse(path) {
		t.Error("a database a server holds is not in use")
	}
	unlock()
	if InUse(path) {
		t.Error("a database released is still in use")
	}
}
