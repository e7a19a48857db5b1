package schemas

import "embed"

// FS holds fleetlift.cue and the generated *.schema.json files.
//
//go:embed fleetlift.cue *.schema.json
var FS embed.FS

// CUEFile is the name of the CUE schema inside FS.
const CUEFile = "fleetlift.cue"

// Version is the schema version the files describe: the `version` every
// definition, config and approval record carries.
const Version = 1

// URLBase is where the JSON Schema files of the main branch are
// published; a release's files are at the same path under its tag
// (URL). Each file's $id is its URL here.
const URLBase = "https://raw.githubusercontent.com/fleetlift/fleetlift/main/schemas/"

// ID is the $id of the JSON Schema file name.
func ID(name string) string { return URLBase + name }

// URL is where release version (a tag such as v0.4.0, or "main") publishes
// the JSON Schema file name: what a campaigns repository's
// yaml-language-server modelines point at.
func URL(version, name string) string {
	return "https://raw.githubusercontent.com/fleetlift/fleetlift/" + version + "/schemas/" + name
}

// File is one generated JSON Schema file.
type File struct {
	// Name is the file's name in FS.
	Name string
	// Definition is the CUE definition it is generated from.
	Definition string
	// Kind is what it describes, as a file's `kind` says it.
	Kind string
}

// Files lists the JSON Schema files generated from CUEFile.
func Files() []File {
	return []File{
		{Name: "task.schema.json", Definition: "#Task", Kind: "Task"},
		{Name: "campaign.schema.json", Definition: "#Campaign", Kind: "Campaign"},
		{Name: "config.schema.json", Definition: "#Config", Kind: "Config"},
		{Name: "approval.schema.json", Definition: "#Approval", Kind: "Approval"},
	}
}

//go:generate go run ./gen -out .
