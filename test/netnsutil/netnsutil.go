// Package netnsutil is the real-network-namespace test harness: it creates
// throw-away namespaces that stand in for a node's host namespace and for
// pods, and veth pairs whose ends stand in for SR-IOV VF netdevs (a sysfs
// fixture maps a VF's PCI address to the veth end's name).
//
// Everything it creates is removed by t.Cleanup. It never touches the links
// of the namespace the test process runs in.
//
// Namespaces need root (CAP_SYS_ADMIN + CAP_NET_ADMIN). RequireRoot skips a
// test without it on a developer's machine, and fails it in CI (CI=true) or
// with RDMANET_REQUIRE_NETNS=1, so that the netns tier cannot silently
// vanish (test/tier).
package netnsutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/test/tier"
)

// EnvRequire makes RequireRoot fail instead of skip (as CI=true does).
const EnvRequire = tier.EnvRequire

// RequireRoot skips (or, in CI or with RDMANET_REQUIRE_NETNS=1, fails) t
// when the process cannot create network namespaces.
func RequireRoot(t testing.TB) {
	t.Helper()
	reason := ""
	if os.Geteuid() != 0 {
		reason = "needs root to create network namespaces and veth pairs (CI runs as root)"
	} else if n, err := testutils.NewNS(); err != nil {
		reason = fmt.Sprintf("cannot create a network namespace even as root (no CAP_SYS_ADMIN in this container?): %v", err)
	} else {
		n.Close()
		_ = testutils.UnmountNS(n)
	}
	if reason != "" {
		tier.Unavailable(t, "netns", reason)
	}
}

// NewNS creates a named network namespace (under /run/netns) removed at cleanup.
func NewNS(t testing.TB) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("create netns: %v", err)
	}
	t.Cleanup(func() {
		n.Close()
		_ = testutils.UnmountNS(n)
	})
	return n
}

// Do runs f inside n and fails t on error.
func Do(t testing.TB, n ns.NetNS, f func() error) {
	t.Helper()
	if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatalf("in netns %s: %v", n.Path(), err)
	}
}

// AddVeth creates a veth pair: name in n, peer in peerNS (or n when nil).
// mac may be nil for a kernel-chosen address.
func AddVeth(t testing.TB, n ns.NetNS, name string, mac net.HardwareAddr, peer string, peerNS ns.NetNS) {
	t.Helper()
	Do(t, n, func() error { return netops.AddVeth(name, peer, mac, peerNS) })
}

// Wire holds the far ends of simulated VFs, so that the host stand-in only
// contains the VF netdevs themselves.
type Wire struct {
	NS ns.NetNS
}

// SimulateVFs creates one veth pair per name: the named end (the simulated
// VF netdev) in host, with a locally administered MAC 02:00:00:00:<i>; the
// far end in a fresh wire namespace. It returns that namespace.
func SimulateVFs(t testing.TB, host ns.NetNS, names ...string) *Wire {
	t.Helper()
	w := &Wire{NS: NewNS(t)}
	for i, name := range names {
		mac := net.HardwareAddr{0x02, 0x00, 0x00, 0x00, byte(i >> 8), byte(i)}
		AddVeth(t, host, name, mac, fmt.Sprintf("wire%d", i), w.NS)
	}
	return w
}

// Link returns the named link of n, ok false when absent.
func Link(t testing.TB, n ns.NetNS, name string) (l netops.Link, ok bool) {
	t.Helper()
	Do(t, n, func() error {
		var err error
		l, err = netops.LinkByName(name)
		if errors.Is(err, netops.ErrLinkNotFound) {
			return nil
		}
		ok = err == nil
		return err
	})
	return l, ok
}

// Links lists the link names of n.
func Links(t testing.TB, n ns.NetNS) []string {
	t.Helper()
	var out []string
	Do(t, n, func() error {
		ls, err := netops.Links()
		for _, l := range ls {
			out = append(out, l.Name)
		}
		return err
	})
	return out
}

// Addrs lists the addresses (CIDR form) of link name in n.
func Addrs(t testing.TB, n ns.NetNS, name string) []string {
	t.Helper()
	var out []string
	Do(t, n, func() error {
		as, err := netops.Addrs(name)
		for _, a := range as {
			out = append(out, a.String())
		}
		return err
	})
	return out
}

// ReturnToHost does what the kernel does to a physical netdev when its
// namespace is destroyed: it moves link name of pod back into host, keeping
// its (pod-side) name. Call it before deleting pod to simulate "netns gone"
// with a veth-backed VF, which the kernel would otherwise destroy.
func ReturnToHost(t testing.TB, pod, host ns.NetNS, name string) {
	t.Helper()
	Do(t, pod, func() error {
		if err := netops.SetLinkDown(name); err != nil {
			return err
		}
		return netops.SetLinkNetns(name, host)
	})
}

// DeleteNS removes n now (before cleanup), as a runtime does when a pod sandbox goes away.
func DeleteNS(t testing.TB, n ns.NetNS) {
	t.Helper()
	n.Close()
	if err := testutils.UnmountNS(n); err != nil {
		t.Fatalf("delete netns %s: %v", n.Path(), err)
	}
}

// Routes lists the route destinations of link name in n ("default" for a default route).
func Routes(t testing.TB, n ns.NetNS, name string) []string {
	t.Helper()
	var out []string
	Do(t, n, func() error {
		var err error
		out, err = netops.Routes(name)
		return err
	})
	return out
}

// SetMTU sets the MTU of link name in n.
func SetMTU(t testing.TB, n ns.NetNS, name string, mtu int) {
	t.Helper()
	Do(t, n, func() error { return netops.SetLinkMTU(name, mtu) })
}

// SetUp brings link name in n up.
func SetUp(t testing.TB, n ns.NetNS, name string) {
	t.Helper()
	Do(t, n, func() error { return netops.SetLinkUp(name) })
}
