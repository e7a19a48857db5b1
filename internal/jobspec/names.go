package jobspec

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

var (
	notName  = regexp.MustCompile(`[^a-z0-9-]+`)
	notLabel = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// Name is the Kubernetes name of sandbox id (a SandboxRequest's or a
// Job's): id itself when it is a DNS label of at most 63 characters,
// else a cleaned, shortened form with a hash of id, so distinct ids never
// share a name.
func Name(id string) string {
	clean := strings.Trim(notName.ReplaceAllString(strings.ToLower(id), "-"), "-")
	if clean == id && len(id) <= 63 && id != "" {
		return id
	}
	return shorten(clean, id, "-")
}

// LabelValue is id as a label value, shortened with a hash as Name does.
func LabelValue(id string) string {
	clean := strings.Trim(notLabel.ReplaceAllString(id, "-"), "-._")
	if clean == id && len(id) <= 63 && id != "" {
		return id
	}
	return shorten(clean, id, "-")
}

func shorten(clean, id, sep string) string {
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])[:10]
	if len(clean) > 52 {
		clean = strings.Trim(clean[:52], "-._")
	}
	if clean == "" {
		return "sandbox" + sep + h
	}
	return clean + sep + h
}
