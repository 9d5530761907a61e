// Command pause is the pod sandbox process of the real-node test harness's
// image localhost/pause:rdmanet (internal/image.Pause): it holds the pod's
// namespaces, sleeps until SIGTERM or SIGINT (then exits 0) and, as PID 1
// of the pod's PID namespace, reaps every zombie it inherits. It stands in
// for registry.k8s.io/pause, which cannot be pulled on this machine.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("pause (rdmanet test harness)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not running as PID 1")
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	reap() // children that exited before Notify
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: shutting down, got signal %v\n", s)
		os.Exit(0)
	}
}

// reap waits for every child that has exited, without blocking.
func reap() int {
	n := 0
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return n
		}
		n++
	}
}
