package node

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// minFreePercent is the free share of the filesystem holding the node's
// directory that Start asks for: the kubelet evicts pods, collects
// images and taints the node (disk-pressure) below 1% (evictionHard),
// so a test started nearer than this fails midway with pods that will
// not schedule and images gone (ErrImageNeverPull).
const minFreePercent = 3

// checkDisk refuses to start a node on a filesystem too full for it.
func checkDisk(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("read the free space of %s: %w", dir, err)
	}
	if st.Blocks == 0 {
		return nil
	}
	free := st.Bavail * uint64(st.Bsize)
	pct := float64(st.Bavail) * 100 / float64(st.Blocks)
	if pct < minFreePercent {
		return fmt.Errorf("the filesystem holding %s has %.1f GiB free (%.1f%%): the test kubelet evicts pods and images below 1%% and needs %d%% to run a suite; free space first (docker builder prune, docker image prune, go clean -cache)",
			dir, float64(free)/(1<<30), pct, minFreePercent)
	}
	return nil
}
