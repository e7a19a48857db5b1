// Package schemas embeds fleetlift's definition schemas: fleetlift.cue, the
// source of truth, and the JSON Schema files generated from it for editors
// (task, campaign, config and approval .schema.json; `make generate` writes
// them).
//
// It imports nothing but the standard library.
package schemas
