//go:build !linux

package main

import "testing"

// watchCreated needs Linux's inotify: elsewhere the test that asks for
// it fails, saying so.
func watchCreated(t *testing.T, dir string) func() []string {
	t.Helper()
	t.Fatalf("watching %s for what is made there needs inotify (Linux)", dir)
	return nil
}
