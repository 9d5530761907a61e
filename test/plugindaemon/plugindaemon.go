// Package plugindaemon runs a real rdmanet-daemon serving only its plugin
// socket (--meta=false), for the tests and benchmarks of exec'd plugins as
// thin clients of it (test/cni, test/e2e, test/bench/ipamcompare).
package plugindaemon

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Daemon is one running rdmanet-daemon.
type Daemon struct {
	Socket, LogPath string
	cmd             *exec.Cmd
	logf            *os.File
}

// Start runs <binDir>/rdmanet-daemon --meta=false --plugin-socket socket
// with its output appended to logPath, and returns once the socket takes
// connections. start starts the command (nil: cmd.Start; a test passes one
// that starts it in a simulated node's network namespace).
func Start(binDir, socket, logPath string, start func(*exec.Cmd) error) (*Daemon, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(binDir, "rdmanet-daemon"), "--meta=false", "--plugin-socket", socket, "--log-level", "info")
	cmd.Stdout, cmd.Stderr = logf, logf
	if start == nil {
		start = (*exec.Cmd).Start
	}
	if err := start(cmd); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start rdmanet-daemon: %w", err)
	}
	d := &Daemon{Socket: socket, LogPath: logPath, cmd: cmd, logf: logf}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			return d, nil
		}
		if time.Now().After(deadline) {
			d.Stop(os.Kill)
			return nil, fmt.Errorf("rdmanet-daemon did not serve %s within 20s; log:\n%s", socket, d.Log())
		}
	}
}

// Pid is the daemon's process ID.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Stop sends sig (os.Interrupt: a clean stop; os.Kill: a crash that leaves
// the socket file behind) and waits for the daemon to exit.
func (d *Daemon) Stop(sig os.Signal) {
	_ = d.cmd.Process.Signal(sig)
	_ = d.cmd.Wait()
	d.logf.Close()
}

// Log is what the daemon has logged so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.LogPath)
	return string(b)
}
