// Package ocitest serves a container registry on loopback for tests, with
// crane (bin/crane), the tool make dist and the release workflow push
// images with.
package ocitest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Crane is bin/crane in the repository at root; it fails the test, naming
// the command that installs it, where it is missing.
func Crane(t testing.TB, root string) string {
	t.Helper()
	crane, err := filepath.Abs(filepath.Join(root, "bin", "crane"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(crane); err != nil {
		t.Fatalf("crane, which make dist runs, is not installed: run make tools (%v)", err)
	}
	return crane
}

// Registry serves a registry on 127.0.0.1 (crane registry serve, blobs in
// memory) until the test ends, and returns its address, host:port. A
// registry on loopback is spoken to over plain HTTP by crane, Docker and
// containerd alike.
func Registry(t testing.TB, crane string) string {
	t.Helper()
	serve := exec.Command(crane, "registry", "serve", "--address", "127.0.0.1:0")
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	port := make(chan string, 1)
	go func() {
		// Read to the end: the registry logs every request there.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, p, ok := strings.Cut(sc.Text(), "serving on port "); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		return "127.0.0.1:" + p
	case <-time.After(30 * time.Second):
		t.Fatal("crane registry serve did not say its port")
		return ""
	}
}
