package netnsutil_test

import (
	"slices"
	"testing"

	"github.com/rdmanet/rdmanet/test/netnsutil"
)

func TestSimulateVFsAndReturnToHost(t *testing.T) {
	netnsutil.RequireRoot(t)
	host, pod := netnsutil.NewNS(t), netnsutil.NewNS(t)
	w := netnsutil.SimulateVFs(t, host, "enp65s0f0v0", "enp65s0f0v1")
	if got := netnsutil.Links(t, host); !slices.Contains(got, "enp65s0f0v0") || !slices.Contains(got, "enp65s0f0v1") || len(got) != 3 {
		t.Fatalf("host links %v, want lo and the two VF netdevs only", got)
	}
	if got := netnsutil.Links(t, w.NS); len(got) != 3 {
		t.Fatalf("wire links %v, want lo and two far ends", got)
	}
	l, ok := netnsutil.Link(t, host, "enp65s0f0v1")
	if !ok || l.MAC.String() != "02:00:00:00:00:01" || l.Kind != "veth" {
		t.Fatalf("VF 1 netdev %+v (present %v)", l, ok)
	}
	netnsutil.Do(t, host, func() error { return moveTo("enp65s0f0v1", pod) })
	netnsutil.ReturnToHost(t, pod, host, "enp65s0f0v1")
	if _, ok := netnsutil.Link(t, host, "enp65s0f0v1"); !ok {
		t.Fatal("ReturnToHost did not bring the netdev back")
	}
	netnsutil.DeleteNS(t, pod)
}
