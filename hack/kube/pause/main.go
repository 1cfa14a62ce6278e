// Command pause is the sandbox process of the test cluster's pods (hack/kube-up.sh): the
// container runtime starts it first in every pod to hold the pod's namespaces, and stops it last.
//
// It does nothing but wait: it exits 0 on SIGTERM or SIGINT, and as PID 1 of a pod that shares
// its process namespace it reaps the children that get reparented to it (SIGCHLD).
// Built static (CGO_ENABLED=0) and packed into an image by hack/kube/ociimage; see
// docs/internals/kube-test-cluster.md.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
