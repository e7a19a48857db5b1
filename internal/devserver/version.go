package devserver

import (
	"database/sql"
	"fmt"
	"strings"
	"time"

	sqliteschema "go.temporal.io/server/schema/sqlite"
)

// The names under which the database records the Temporal schema
// versions it holds, in the layout of Temporal's schema_version table.
const (
	mainSchemaName       = "temporal"
	visibilitySchemaName = "temporal_visibility"
)

// The schema_version table as Temporal's SQL tools make it.
const (
	createVersionTable = `CREATE TABLE IF NOT EXISTS schema_version(version_partition INT not null, db_name VARCHAR(255) not null, ` +
		`creation_time DATETIME(6), curr_version VARCHAR(64), min_compatible_version VARCHAR(64), PRIMARY KEY (version_partition, db_name))`
	writeVersion = `REPLACE INTO schema_version(version_partition, db_name, creation_time, curr_version, min_compatible_version) VALUES (0, ?, ?, ?, ?)`
)

// wantVersions are the schema versions of the Temporal server linked in.
func wantVersions() map[string]string {
	return map[string]string{mainSchemaName: sqliteschema.Version, visibilitySchemaName: sqliteschema.VisibilityVersion}
}

// execer is a connection or a transaction.
type execer interface {
	Exec(query string, args ...any) (sql.Result, error)
}

// writeVersions records the linked server's schema versions. Temporal's
// SQLite schema records none of its own.
func writeVersions(db execer) error {
	if _, err := db.Exec(createVersionTable); err != nil {
		return fmt.Errorf("record schema version: %w", err)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for name, v := range wantVersions() {
		if _, err := db.Exec(writeVersion, name, now, v, v); err != nil {
			return fmt.Errorf("record schema version: %w", err)
		}
	}
	return nil
}

// readVersions reads the schema versions the database records, if any.
func readVersions(db *sql.DB, got schema) (map[string]string, error) {
	versions := map[string]string{}
	if got.objects["schema_version"] != "table" {
		return versions, nil
	}
	rows, err := db.Query(`SELECT db_name, curr_version FROM schema_version WHERE version_partition = 0`)
	if err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, v string
		if err := rows.Scan(&name, &v); err != nil {
			return nil, fmt.Errorf("read schema versions: %w", err)
		}
		versions[name] = v
	}
	return versions, rows.Err()
}

// refuseNewer refuses a database a newer Temporal schema made: this
// fleetlift's server would not know what its schema means.
func refuseNewer(path string, versions map[string]string) error {
	for name, want := range wantVersions() {
		if got, ok := versions[name]; ok && newerVersion(got, want) {
			return fmt.Errorf("temporal database %s holds Temporal schema %s %s, newer than the %s this fleetlift knows: run it with the fleetlift that made it, or a newer one",
				path, name, got, want)
		}
	}
	return nil
}

// stampVersions records the linked server's schema versions in a
// complete database that records none or older ones (an earlier
// fleetlift made it), so that a later one knows what it holds.
func stampVersions(db *sql.DB, path string, versions map[string]string) error {
	stale := false
	for name, want := range wantVersions() {
		if versions[name] != want {
			stale = true
		}
	}
	if !stale {
		return nil
	}
	if err := writeVersions(db); err != nil {
		return fmt.Errorf("temporal database %s: %w", path, err)
	}
	return nil
}

// newerVersion reports whether version a (such as "0.11") is newer than
// b. Parts that are not numbers compare as text.
func newerVersion(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		var na, nb int
		if _, errA := fmt.Sscanf(pa[i], "%d", &na); errA == nil {
			if _, errB := fmt.Sscanf(pb[i], "%d", &nb); errB == nil {
				return na > nb
			}
		}
		return pa[i] > pb[i]
	}
	return len(pa) > len(pb)
}
