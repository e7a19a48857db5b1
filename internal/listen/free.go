package listen

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// FreePorts is n distinct TCP ports of host that nothing listens on now,
// none of them one of except, for a server that binds each by number
// later (the embedded Temporal server's services, a kubelet, a test's
// Gitea).
//
// They come from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range). A port from the range, found by
// listening on port 0 and closing, is free again at once, and the next
// connection the machine makes may take it as its source port before the
// server binds it: "bind: address already in use", which a busy machine
// met (a kubelet under the full test suite). Below the range only a
// process that asks for the port by number takes it.
func FreePorts(host string, n int, except ...int) ([]int, error) {
	low := ephemeralLow()
	// Each port found is held until all are, so that none is found twice.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	var ports []int
	var lastErr error
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("no free port on %s below %d: %w", host, low, lastErr)
		}
		port := low/2 + rand.IntN(low-low/2)
		if slices.Contains(except, port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			lastErr = err
			continue
		}
		held = append(held, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// FreeAddr is host and one of its FreePorts, as an address to listen on.
func FreeAddr(host string) (string, error) {
	ports, err := FreePorts(host, 1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(ports[0])), nil
}

// ephemeralLow is the first port of the kernel's ephemeral range, 32768
// (Linux's default, and below the 49152 of other systems) where it
// cannot be read.
func ephemeralLow() int {
	const fallback = 32768
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 2 {
		return fallback
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low < 2048 {
		return fallback
	}
	return low
}
