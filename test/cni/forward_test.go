package cni_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/plugindaemon"
)

// pluginDaemon is a real rdmanet-daemon serving only the plugin socket
// (--meta=false), started in the node's host namespace as the DaemonSet's
// container runs in the node's; it can be stopped and started again.
type pluginDaemon struct {
	t      *testing.T
	n      *node
	bin    string
	socket string
	log    string
	d      *plugindaemon.Daemon // nil while stopped
}

func (d *pluginDaemon) start() {
	d.t.Helper()
	var err error
	if d.d, err = plugindaemon.Start(d.bin, d.socket, d.log, func(c *exec.Cmd) error { return d.n.inHost(c.Start) }); err != nil {
		d.t.Fatal(err)
	}
}

// stop ends the daemon with sig and waits for it.
func (d *pluginDaemon) stop(sig syscall.Signal) {
	if d.d != nil {
		d.d.Stop(sig)
		d.d = nil
	}
}

func (d *pluginDaemon) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// served counts the daemon's "served by the daemon" lines of plugin and cmd.
func (d *pluginDaemon) served(plugin, cmd string) int {
	n := 0
	for _, l := range strings.Split(d.logText(), "\n") {
		if strings.Contains(l, "plugin call served by the daemon") && strings.Contains(l, "plugin="+plugin+" ") && strings.Contains(l, "command="+cmd+" ") {
			n++
		}
	}
	return n
}

// TestForwardedSeedChain runs the seed chain (sriov → rdma, whereabouts
// inside sriov) through libcni with the exec'd binaries as thin clients of a
// real rdmanet-daemon: served by the daemon while it runs; done by the
// binaries themselves with the daemon stopped, killed (stale socket) and
// killed in the middle of a call; served again once it is restarted. Every
// pod gets net1 with an address, and every DEL leaves the VF and the IPAM
// store as they were.
func TestForwardedSeedChain(t *testing.T) {
	dir := stampedBin(t)
	n := newNode(t, 4)
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(n.root, "cni-cache"), nil)
	d := &pluginDaemon{t: t, n: n, bin: dir, socket: filepath.Join(n.root, "run", "plugins.sock"), log: filepath.Join(n.root, "daemon.log")}
	t.Setenv(daemonclient.EnvSocket, d.socket)
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.logText())
		}
	})

	// attach ADDs VF i to a new pod, checks net1 and its address, then CHECK
	// and DEL it and checks the node is restored.
	attach := func(t *testing.T, i int) {
		t.Helper()
		pod := netnsutil.NewNS(t)
		l := confList(t, seedNAD, "1.0.0", vfBDF(i))
		r := rt(i, pod)
		res, err := n.add(l, r)
		if err != nil {
			t.Fatalf("ADD: %v", err)
		}
		cur, err := current.NewResultFromResult(res)
		if err != nil || len(cur.IPs) != 1 {
			t.Fatalf("ADD result %v (%v): want one address", res, err)
		}
		if a := netnsutil.Addrs(t, pod, "net1"); len(a) != 1 || a[0] != cur.IPs[0].Address.String() {
			t.Errorf("pod net1 addresses %v, want [%s]", a, cur.IPs[0].Address.String())
		}
		if got := n.allocations(t)[containerID(i)]; len(got) != 1 {
			t.Errorf("IPAM store holds %v for %s, want one address", got, containerID(i))
		}
		if err := n.check(l, r); err != nil {
			t.Errorf("CHECK: %v", err)
		}
		if err := n.del(l, r); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		if got := n.allocations(t)[containerID(i)]; len(got) != 0 {
			t.Errorf("IPAM store still holds %v for %s after DEL", got, containerID(i))
		}
		n.assertRestored(t, i, containerID(i))
	}

	t.Run("daemon up: served by the daemon", func(t *testing.T) {
		d.start()
		attach(t, 0)
		for _, c := range []string{"ADD", "CHECK", "DEL"} {
			for _, p := range []string{"sriov", "rdma"} {
				if d.served(p, c) != 1 {
					t.Errorf("daemon served %s %s %d times, want once; log:\n%s", p, c, d.served(p, c), d.logText())
				}
			}
		}
	})
	t.Run("daemon stopped: the binaries do the work", func(t *testing.T) {
		d.stop(syscall.SIGTERM)
		if _, err := os.Lstat(d.socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stopped daemon left its socket: %v", err)
		}
		before := d.logText()
		attach(t, 1)
		if d.logText() != before {
			t.Errorf("a stopped daemon logged calls")
		}
	})
	t.Run("daemon killed: stale socket, the binaries do the work", func(t *testing.T) {
		d.start()
		d.stop(syscall.SIGKILL)
		if _, err := os.Lstat(d.socket); err != nil {
			t.Fatalf("a killed daemon leaves its socket file behind; it is gone: %v", err)
		}
		attach(t, 2)
	})
	t.Run("daemon killed mid-call: ADD asks to try again, DEL runs here", func(t *testing.T) {
		// What a daemon killed during a call looks like to the plugin: the
		// request is taken, the connection closes without an answer.
		hung := hangingDaemon(t, d.socket)
		pod := netnsutil.NewNS(t)
		const i = 3
		l := confList(t, seedNAD, "1.0.0", vfBDF(i))
		r := rt(i, pod)
		_, err := n.add(l, r)
		var te *types.Error
		if !errors.As(err, &te) || te.Code != types.ErrTryAgainLater || !strings.Contains(te.Msg, "gave no answer") {
			t.Fatalf("ADD with the daemon dying mid-call: %v, want error code %d (try again later)", err, types.ErrTryAgainLater)
		}
		if err := n.del(l, r); err != nil {
			t.Fatalf("DEL after the lost ADD: %v", err)
		}
		if got := hung(); got["ADD"] != 1 || got["DEL"] < 1 {
			t.Errorf("the dying daemon took %v, want one ADD and the DELs", got)
		}
		n.assertRestored(t, i, containerID(i))
		if len(n.allocations(t)) != 0 {
			t.Errorf("addresses left: %v", n.allocations(t))
		}
		// and the binaries do the whole job once nothing listens
		attach(t, i)
	})
	t.Run("daemon restarted: served again", func(t *testing.T) {
		adds := d.served("sriov", "ADD")
		d.start()
		attach(t, 0)
		if d.served("sriov", "ADD") != adds+1 {
			t.Errorf("restarted daemon served sriov ADD %d times, want %d", d.served("sriov", "ADD"), adds+1)
		}
	})
}

// hangingDaemon listens on socket like a daemon that dies during every
// call: it reads the request and closes the connection without answering.
// It returns a function that stops it and counts the requests by command.
func hangingDaemon(t *testing.T, socket string) func() map[string]int {
	t.Helper()
	_ = os.Remove(socket)
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			var req daemonclient.PluginRequest
			if err := daemonclient.Read(c, &req); err == nil {
				for _, kv := range req.Env {
					if v, ok := strings.CutPrefix(kv, "CNI_COMMAND="); ok {
						got <- v
					}
				}
			}
			c.Close()
		}
	}()
	stop := func() map[string]int {
		lis.Close()
		<-done
		close(got)
		m := map[string]int{}
		for c := range got {
			m[c]++
		}
		return m
	}
	t.Cleanup(func() { lis.Close() })
	return stop
}

// TestForwardedIPAMDaemonKilledMidCall kills a real rdmanet-daemon while it
// serves an exec'd rdmanet-ipam ADD (held inside the call: the test holds
// the node's allocation lock the daemon waits for): the plugin answers
// "try again later" (11) and allocates nothing; with the daemon gone, DEL
// and the retried ADD run in the plugin's own process (rdmanet-ipam-direct)
// and the retried ADD gets an address.
func TestForwardedIPAMDaemonKilledMidCall(t *testing.T) {
	dir := stampedBin(t)
	n := newNode(t, 1)
	d := &pluginDaemon{t: t, n: n, bin: dir, socket: filepath.Join(n.root, "run", "plugins.sock"), log: filepath.Join(n.root, "daemon.log")}
	t.Cleanup(func() { d.stop(syscall.SIGKILL) })
	d.start()
	pod := netnsutil.NewNS(t)
	conf := `{"cniVersion":"1.0.0","name":"killed","ipam":{"type":"rdmanet-ipam","range":"10.77.0.0/24","network_name":"killed"}}`
	call := func(cmd string) (string, int) {
		c := exec.Command(filepath.Join(dir, "rdmanet-ipam"))
		c.Env = append(os.Environ(), "CNI_COMMAND="+cmd, "CNI_CONTAINERID=killed-1", "CNI_NETNS="+pod.Path(), "CNI_IFNAME=net1",
			"CNI_PATH="+dir, daemonclient.EnvSocket+"="+d.socket)
		c.Stdin = strings.NewReader(conf)
		out, err := c.Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	// hold the node's lock of the pool: the daemon's ADD waits inside the call
	pool := ipam.Pool{Network: "killed", Prefix: netip.MustParsePrefix("10.77.0.0/24")}
	unlock, err := (&ipam.FileLock{Dir: n.ipamDir}).Lock(context.Background(), pool.Key())
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		out  string
		code int
	}
	got := make(chan answer, 1)
	go func() { out, code := call("ADD"); got <- answer{out, code} }()
	// wait until the daemon's call blocks on the lock (/proc/locks lists
	// blocked waiters as "-> FLOCK ... <pid> ...")
	pid := strconv.Itoa(d.d.Pid())
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/locks")
		if waiting := regexp.MustCompile(`-> FLOCK\s+\S+\s+\S+\s+` + pid + `\s`).Match(b); waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon never waited on the IPAM lock; /proc/locks:\n%s\ndaemon log:\n%s", b, d.logText())
		}
	}
	d.stop(syscall.SIGKILL)
	a := <-got
	unlock()
	var te types.Error
	if a.code == 0 || json.Unmarshal([]byte(a.out), &te) != nil || te.Code != types.ErrTryAgainLater {
		t.Fatalf("ADD with the daemon killed mid-call: exit %d, stdout %q; want CNI error %d", a.code, a.out, types.ErrTryAgainLater)
	}
	if got := n.allocations(t); len(got) != 0 {
		t.Errorf("the killed call allocated %v", got)
	}
	if _, err := os.Lstat(d.socket); err != nil {
		t.Fatalf("the killed daemon's socket file should be left behind: %v", err)
	}
	if out, code := call("DEL"); code != 0 {
		t.Fatalf("DEL with the daemon gone: exit %d: %s", code, out)
	}
	out, code := call("ADD")
	if code != 0 || !strings.Contains(out, "10.77.0.") {
		t.Fatalf("ADD with the daemon gone: exit %d: %s", code, out)
	}
	if got := n.allocations(t)["killed-1"]; len(got) != 1 {
		t.Errorf("store holds %v for the retried ADD, want one address", got)
	}
	if out, code := call("DEL"); code != 0 || len(n.allocations(t)) != 0 {
		t.Fatalf("final DEL: exit %d: %s; left %v", code, out, n.allocations(t))
	}
}
