package imagetest

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestMemoryLimitFromTheContainer: in a container with a memory limit,
// fleetlift and fleetlift-controller give the Go runtime 90% of it as
// their soft limit, and GOMEMLIMIT, when set, wins.
func TestMemoryLimitFromTheContainer(t *testing.T) {
	requireImages(t, fleetliftImage)
	const limit = 256 << 20
	want := "bytes=" + strconv.Itoa(limit*9/10)
	for _, c := range []struct {
		name string
		run  []string
		cmd  []string
		want string
	}{
		{"fleetlift", nil, []string{"--log-level", "debug", "version"}, `msg="Go memory limit" ` + want},
		{"fleetlift with GOMEMLIMIT", []string{"-e", "GOMEMLIMIT=100MiB"}, []string{"--log-level", "debug", "version"}, `msg="Go memory limit" bytes=104857600`},
		// It stops at its missing --allowed-image after logging.
		{"fleetlift-controller", []string{"--entrypoint", "fleetlift-controller"}, []string{"--log-level", "debug"}, `"msg":"Go memory limit","bytes":` + strconv.Itoa(limit*9/10)},
	} {
		args := append([]string{"run", "--rm", "--network", "none", "--label", label, "--memory", strconv.Itoa(limit)}, c.run...)
		args = append(append(args, fleetliftImage), c.cmd...)
		out, _ := exec.Command(dockerCLI(), args...).CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%s: docker %s said\n%s\nwant a line with %q", c.name, strings.Join(args, " "), out, c.want)
		}
	}
}
