package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/test/apiserver"
	"github.com/rdmanet/rdmanet/test/ipamload"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/plugindaemon"
)

// startPluginDaemon runs rdmanet-daemon serving only its plugin socket, as
// on a node where the exec'd plugins are thin clients of it; in host (nil:
// this process's namespace), where it runs in-process plugins that move
// links. It returns when the socket answers; the daemon stops at cleanup.
func startPluginDaemon(t testing.TB, socket, logPath string, host ns.NetNS) {
	t.Helper()
	var start func(*exec.Cmd) error
	if host != nil {
		start = func(c *exec.Cmd) error { return host.Do(func(ns.NetNS) error { return c.Start() }) }
	}
	d, err := plugindaemon.Start(binDir, socket, logPath, start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(os.Interrupt) })
}

// TestPluginDaemonsAcrossNodes: two rdmanet-daemons as two nodes over one
// API server serve 1000 exec'd rdmanet-ipam ADDs, 20 at a time, from a
// range just big enough (a /22: 16 blocks of /26, 1022 usable addresses).
// node-a takes two ADDs of every three (667, 11 blocks' worth), node-b the
// rest (333, 6 blocks' worth): 17 blocks do not exist, so a node must
// borrow from the other's blocks, which the test checks happened. Each daemon answers
// from its warm client and node-local block cache, but the API server
// decides (every write carries the block's resourceVersion): no address is
// handed out twice, the store holds exactly what the plugins were told, and
// the DELs leave nothing.
func TestPluginDaemonsAcrossNodes(t *testing.T) {
	netnsutil.RequireRoot(t)
	api := apiserver.Shared(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	const network, cidr = "xnode", "10.210.0.0/22"
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"xnode","ipam":{"type":"rdmanet-ipam","range":%q,"network_name":%q,"node_slice_size":"/26","store":{"type":"kubernetes","kubeconfig":%q}}}`,
		cidr, network, kubeconfig)
	byName := map[string]ipamload.Node{}
	for _, name := range []string{"node-a", "node-b"} {
		sock := filepath.Join(dir, name, "plugins.sock")
		startPluginDaemon(t, sock, filepath.Join(dir, name+".log"), nil)
		byName[name] = ipamload.Node{Name: name, Env: []string{"NODENAME=" + name, "RDMANET_PLUGIN_SOCKET=" + sock,
			"RDMANET_IPAM_STORE_PATH=" + filepath.Join(dir, name, "ipam")}}
	}
	nodes := []ipamload.Node{byName["node-a"], byName["node-a"], byName["node-b"]} // call i runs on nodes[i%3]
	pod := netnsutil.NewNS(t)                                                      // in-process ADDs refuse the daemon's own netns
	l := &ipamload.Load{Bin: filepath.Join(binDir, "rdmanet-ipam"), Config: []byte(conf), Nodes: nodes,
		Netns: pod.Path(), CNIPath: binDir, Prefix: "xnode"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	const n, conc = 1000, 20
	add := l.Do(ctx, "ADD", n, conc)
	if failed, first := add.Failed(); failed > 0 {
		t.Fatalf("%d of %d ADDs failed; first: %v", failed, n, first)
	}
	if d := add.Duplicates(); d > 0 {
		t.Fatalf("%d addresses handed out twice", d)
	}
	r := netip.MustParsePrefix(cidr)
	for i, a := range add.Addr {
		if !r.Contains(a) {
			t.Fatalf("ADD %d got %s outside %s", i, a, cidr)
		}
	}
	// every call was served by its node's daemon
	want := map[string]int{}
	for i := range n {
		want[nodes[i%len(nodes)].Name]++
	}
	for name, w := range want {
		b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
		if got := strings.Count(string(b), "plugin call served by the daemon"); got != w {
			t.Errorf("daemon of %s served %d calls, want %d (one per ADD of its node); log tail:\n%s", name, got, w, tail(b))
		}
	}
	store, err := ipam.NewKubeStore(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	pool := ipam.Pool{Network: network, Prefix: r}
	borrowed := 0
	held := func() (map[netip.Addr]string, map[string]int) {
		blocks, err := store.List(ctx, pool, "")
		if err != nil {
			t.Fatal(err)
		}
		m := map[netip.Addr]string{}
		owners := map[string]int{} // block owner node -> blocks
		borrowed = 0
		for _, b := range blocks {
			owners[b.Spec.Node]++
			for ip, a := range b.Spec.Allocations {
				if a.Reserved == "" {
					m[netip.MustParseAddr(ip)] = a.ContainerID
					if a.Node != "" && a.Node != b.Spec.Node {
						borrowed++
					}
				}
			}
		}
		return m, owners
	}
	got, owners := held()
	if borrowed == 0 {
		t.Errorf("no address was borrowed from the other node's blocks (blocks by node %v): the test did not exercise borrowing", owners)
	}
	if len(got) != n {
		t.Errorf("the store holds %d allocations, the plugins handed out %d", len(got), n)
	}
	for i, a := range add.Addr {
		if got[a] != l.ContainerID(i) {
			t.Errorf("store: %s held by %q, the plugin gave it to %s", a, got[a], l.ContainerID(i))
		}
	}
	if len(owners) != 2 {
		t.Errorf("blocks by node %v: want both nodes to hold blocks", owners)
	}
	t.Logf("ADD: wall %v p50 %v p99 %v; blocks by node %v; %d addresses borrowed", add.Wall, add.Pct(50), add.Pct(99), owners, borrowed)

	del := l.Do(ctx, "DEL", n, conc)
	if failed, first := del.Failed(); failed > 0 {
		t.Fatalf("%d of %d DELs failed; first: %v", failed, n, first)
	}
	if left, _ := held(); len(left) != 0 {
		t.Errorf("%d allocations left after DEL", len(left))
	}
}

func tail(b []byte) string {
	s := string(b)
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}
