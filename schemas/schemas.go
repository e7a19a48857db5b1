package schemas

import "embed"

// FS holds fleetlift.cue and the generated *.schema.json files.
//
//go:embed fleetlift.cue *.schema.json
var FS embed.FS

// CUEFile is the name of the CUE schema inside FS.
const CUEFile = "fleetlift.cue"

//go:generate go run ./gen -out .
