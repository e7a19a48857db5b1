package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// ID identifies a record for carrying it out once: its file and a digest
// of what it says. The same record read again at a later revision has the
// same ID (and a workflow that carried it out ignores it); a record
// edited in place has a new one.
func (r Record) ID() string {
	// Generation is left out when zero, so that records written before
	// it existed keep their IDs.
	b, _ := json.Marshal(struct {
		Target, ResultDigest, By string
		Action                   Action
		Prompt                   string
		Generation               int64 `json:",omitempty"`
	}{r.Target, r.ResultDigest, r.By, r.Action, r.Prompt, r.Generation})
	sum := sha256.Sum256(b)
	return r.File + "@" + hex.EncodeToString(sum[:6])
}
