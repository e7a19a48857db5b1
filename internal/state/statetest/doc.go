// Package statetest is the conformance suite every state store passes:
// Run for stores that read and write, RunReader for read-only stores (such
// as one reading the Temporal workflows' memos), each given a factory for
// a fresh store.
//
// statetest imports package state, testing and the standard library only:
// no SDK, and no store implementation.
package statetest
