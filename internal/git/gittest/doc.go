// Package gittest builds real git repositories for tests: bare "remote"
// repositories on disk with files, symbolic links and submodules.
//
// gittest imports only the standard library and the testing package; it
// must not be imported by production code.
package gittest
