// Command pause is the sandbox ("pause") container of the real node's
// pods: it holds the pod's namespaces, reaps the children it adopts, and
// exits on SIGTERM or SIGINT. No registry is reachable here, so the node
// builds it and imports it into containerd as its sandbox image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
