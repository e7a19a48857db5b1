package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Workers started at once with one state directory take slots 0, 1 and
// so on, and with them sandboxes, a host queue and a Docker scope of
// their own; a slot given up (its worker stopped or died) is the next
// worker's, with its predecessor's names.
func TestWorkersSharingAStateDirectoryTakeASlotEach(t *testing.T) {
	dir := t.TempDir()
	tf := &temporalFlags{stateDir: dir}
	first, err := claimSlot(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := claimSlot(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, b := &workerFlags{slot: first}, &workerFlags{slot: second}
	if got := a.sandboxDir(dir); got != filepath.Join(dir, "sandboxes") {
		t.Errorf("the first worker's sandboxes are under %s; want %s/sandboxes, as a worker alone has", got, dir)
	}
	if got := b.sandboxDir(dir); got != filepath.Join(dir, "sandboxes-1") {
		t.Errorf("the second worker's sandboxes are under %s; want %s/sandboxes-1", got, dir)
	}
	qa, _ := a.hostQueue(tf)
	qb, _ := b.hostQueue(tf)
	if qa == qb || qb != qa+"-1" {
		t.Errorf("host queues %q and %q; want the second the first's with -1", qa, qb)
	}
	host := strings.Repeat("h", 32)
	if got := second.scope(host); len(got) != 32 || !strings.HasSuffix(got, "-1") {
		t.Errorf("the second worker's scope for a 32-character host: %q; want 32 characters ending in -1", got)
	}
	if got := first.scope(host); got != host {
		t.Errorf("the first worker's scope: %q; want the host's", got)
	}

	// The first stops: a worker started next takes its slot back.
	first.release()
	next, err := claimSlot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if next.n != 0 {
		t.Errorf("after the first worker stopped, the next took slot %d; want 0, with the sandboxes it left", next.n)
	}
	next.release()
	second.release()
}
