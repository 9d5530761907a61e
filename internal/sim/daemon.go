package sim

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// nodeDaemon is a simulated node's rdmanet-daemon process, run in the
// node's host namespace with the node's environment, as its DaemonSet runs
// it: the meta shim's socket (the config's daemonSocket) and the plugin
// socket the exec'd sriov, rdma and rdmanet-ipam hand their calls to.
type nodeDaemon struct {
	n            *node
	bin          string
	confPath     string
	socket       string
	pluginSocket string
	logPath      string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// newNodeDaemon writes the daemon's config (the node's meta config with
// daemonSocket) and returns the daemon, not started.
func newNodeDaemon(n *node) (*nodeDaemon, error) {
	d := &nodeDaemon{n: n, bin: filepath.Join(n.l.BinDir, "rdmanet-daemon"),
		confPath: filepath.Join(n.dir, "daemon", "rdmanet.conf"), socket: filepath.Join(n.dir, "daemon", "meta.sock"),
		pluginSocket: filepath.Join(n.dir, "daemon", "plugins.sock"), logPath: filepath.Join(n.dir, "daemon.log")}
	if err := os.MkdirAll(filepath.Dir(d.confPath), 0o700); err != nil {
		return nil, fmt.Errorf("node %s daemon: %w", n.def.Name, err)
	}
	b, err := json.Marshal(n.def.metaConf(n.l, d.socket))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(d.confPath, b, 0o600); err != nil {
		return nil, fmt.Errorf("node %s daemon config: %w", n.def.Name, err)
	}
	return d, nil
}

// start runs the daemon and waits until its meta socket accepts.
func (d *nodeDaemon) start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("node %s daemon log: %w", d.n.def.Name, err)
	}
	cmd := exec.Command(d.bin, "--config", d.confPath, "--node-name", d.n.def.Name, "--plugin-socket", d.pluginSocket, "--log-level", "info")
	cmd.Env = append(os.Environ(), d.n.def.env(d.n.l)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// the child inherits the network namespace of the thread that forks it
	if err := d.n.host.Do(func(ns.NetNS) error { return cmd.Start() }); err != nil {
		logf.Close()
		return fmt.Errorf("node %s: start %s: %w", d.n.def.Name, d.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	d.cmd, d.done = cmd, done
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", d.socket); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			d.cmd = nil
			return fmt.Errorf("node %s: rdmanet-daemon exited at start; see %s", d.n.def.Name, d.logPath)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: rdmanet-daemon did not serve %s within 30s; see %s", d.n.def.Name, d.socket, d.logPath)
		}
	}
}

// signal sends sig and waits for the daemon to exit (SIGTERM: up to 30s,
// then SIGKILL). It is a no-op when the daemon is not running.
func (d *nodeDaemon) signal(sig syscall.Signal) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	d.cmd = nil
}

// kill is a crash: SIGKILL, the sockets stay behind as stale files.
func (d *nodeDaemon) kill() { d.signal(syscall.SIGKILL) }

// stop is an orderly shutdown.
func (d *nodeDaemon) stop() { d.signal(syscall.SIGTERM) }
