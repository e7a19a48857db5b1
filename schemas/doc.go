// Package schemas embeds fleetlift's definition schemas: fleetlift.cue, the
// source of truth, and the JSON Schema 2020-12 files generated from it for
// editors and linters (task, campaign, config and approval .schema.json;
// `make generate` writes them with ./gen). Each file's $id is its URL on the
// main branch (ID); a release publishes its own at URL.
//
// It imports nothing but the standard library.
package schemas
