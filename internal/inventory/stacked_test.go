package inventory_test

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// smallStandard is the bundled node with one VF per PF (fast to write).
func smallStandard(t *testing.T) (*sysfsfixture.Standard, string) {
	t.Helper()
	root := t.TempDir()
	s, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{RoCEVFs: 1, IBVFs: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

// defaultRouteFunctions maps the BDF of every function marked as carrying
// the default route to its DefaultRouteVia.
func defaultRouteFunctions(n *inventory.Node) map[string]string {
	out := map[string]string{}
	for _, f := range n.Functions {
		if f.DefaultRoute {
			out[f.BDF] = f.DefaultRouteVia
		}
	}
	return out
}

// TestDefaultRouteThroughStackedDevices (issue 13, defect 16): a default
// route over a bond, a VLAN, a bridge or a macvlan on top of PFs marks the
// PFs under it, found through the sysfs model's upper/lower links, so the
// device plugin never hands them out. Before the fix only a function whose
// own netdev was the route's device was marked.
func TestDefaultRouteThroughStackedDevices(t *testing.T) {
	const roce, shared, mgmt = "0000:41:00.0", "0000:81:00.0", "0000:03:00.0"
	tests := []struct {
		name   string
		uppers []sysfsfixture.Upper
		route  []string
		want   map[string]string // BDF -> via
	}{
		{name: "route on the PF itself", route: []string{"eno1"}, want: map[string]string{mgmt: ""}},
		{name: "bond over two PFs",
			uppers: []sysfsfixture.Upper{{Name: "bond0", Kind: sysfsfixture.KindBond, Lowers: []string{"enp65s0f0np0", "ens8f0np0"}}},
			route:  []string{"bond0"}, want: map[string]string{roce: "bond0", shared: "bond0"}},
		{name: "VLAN over a PF",
			uppers: []sysfsfixture.Upper{{Name: "ens8f0np0.200", Kind: sysfsfixture.KindVLAN, Lowers: []string{"ens8f0np0"}}},
			route:  []string{"ens8f0np0.200"}, want: map[string]string{shared: "ens8f0np0.200"}},
		{name: "VLAN over a bond over two PFs",
			uppers: []sysfsfixture.Upper{
				{Name: "bond0", Kind: sysfsfixture.KindBond, Lowers: []string{"enp65s0f0np0", "ens8f0np0"}},
				{Name: "bond0.100", Kind: sysfsfixture.KindVLAN, Lowers: []string{"bond0"}}},
			route: []string{"bond0.100"}, want: map[string]string{roce: "bond0.100", shared: "bond0.100"}},
		{name: "bridge with a PF port",
			uppers: []sysfsfixture.Upper{{Name: "br0", Kind: sysfsfixture.KindBridge, Lowers: []string{"ens8f0np0"}}},
			route:  []string{"br0"}, want: map[string]string{shared: "br0"}},
		{name: "bridge over a VLAN over a bond (no lower_ links: brif and bonding/slaves only)",
			uppers: []sysfsfixture.Upper{
				{Name: "bond0", Kind: sysfsfixture.KindBond, Lowers: []string{"enp65s0f0np0"}, NoAdjacency: true},
				{Name: "bond0.7", Kind: sysfsfixture.KindVLAN, Lowers: []string{"bond0"}},
				{Name: "br-mgmt", Kind: sysfsfixture.KindBridge, Lowers: []string{"bond0.7"}, NoAdjacency: true}},
			route: []string{"br-mgmt"}, want: map[string]string{roce: "br-mgmt"}},
		{name: "macvlan over a PF",
			uppers: []sysfsfixture.Upper{{Name: "mgmt0", Kind: sysfsfixture.KindMacvlan, Lowers: []string{"ens8f0np0"}}},
			route:  []string{"mgmt0"}, want: map[string]string{shared: "mgmt0"}},
		{name: "IPv4 on a bond, IPv6 on the PF: each found once",
			uppers: []sysfsfixture.Upper{{Name: "bond0", Kind: sysfsfixture.KindBond, Lowers: []string{"enp65s0f0np0"}}},
			route:  []string{"bond0", "eno1", "enp65s0f0np0"}, want: map[string]string{roce: "bond0", mgmt: ""}},
		{name: "bond over PFs that do not carry the route",
			uppers: []sysfsfixture.Upper{{Name: "bond1", Kind: sysfsfixture.KindBond, Lowers: []string{"enp65s0f0np0", "ens8f0np0"}}},
			route:  []string{"eno1"}, want: map[string]string{mgmt: ""}},
		{name: "route on a netdev sysfs does not know", route: []string{"cni0"}, want: map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, root := smallStandard(t)
			for _, u := range tc.uppers {
				if err := s.AddUpper(u); err != nil {
					t.Fatal(err)
				}
			}
			node, err := inventory.Discover(inventory.Options{SysfsRoot: root, DefaultRouteLinks: tc.route, NetnsModeFlag: "exclusive"})
			if err != nil {
				t.Fatal(err)
			}
			if got := defaultRouteFunctions(node); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("default-route functions %v, want %v", got, tc.want)
			}
			// the PFs' VFs have netdevs of their own, not under the route
			if f := node.Function(sysfsfixture.VFBDF(roce, 0)); f == nil || f.DefaultRoute {
				t.Errorf("VF 0 of the RoCE PF: %+v", f)
			}
		})
	}
}

// TestDefaultRouteNetdevs: the route table's devices plus what the netlink
// resolver finds under them; a resolver error fails the read (the agent
// must not hand out a PF it could not rule out).
func TestDefaultRouteNetdevs(t *testing.T) {
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	route := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"bond0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
	if err := os.WriteFile(filepath.Join(proc, "net/route"), []byte(route), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		lower   func(...string) ([]string, error)
		want    []string
		wantErr bool
	}{
		{name: "no resolver", want: []string{"bond0"}},
		{name: "resolver adds the slaves", lower: func(n ...string) ([]string, error) {
			if !reflect.DeepEqual(n, []string{"bond0"}) {
				t.Errorf("resolver asked for %v", n)
			}
			return []string{"enp65s0f0np0", "ens8f0np0"}, nil
		}, want: []string{"bond0", "enp65s0f0np0", "ens8f0np0"}},
		{name: "resolver fails", lower: func(...string) ([]string, error) { return nil, os.ErrPermission }, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := inventory.DefaultRouteNetdevs(proc, tc.lower)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDefaultRouteOverRealBridge runs the real kernel: a netns whose
// default route is on a bridge with a veth port named like a fixture PF's
// netdev. The netlink resolver (netops.LowerLinks, what the agent uses)
// finds the port from the routing table's bridge, so Discover marks the PF;
// and a sysfs mounted from inside that netns shows the kernel's own
// lower_/brif links, which the sysfs model reads the same way.
func TestDefaultRouteOverRealBridge(t *testing.T) {
	netnsutil.RequireRoot(t)
	n := netnsutil.NewNS(t)
	const pfNetdev = "ens8f0np0"
	netnsutil.AddVeth(t, n, pfNetdev, nil, "wire0", n)
	netnsutil.Do(t, n, func() error {
		if err := netops.AddBridge("br0"); err != nil {
			return err
		}
		if err := netops.SetLinkMaster(pfNetdev, "br0"); err != nil {
			return err
		}
		if err := netops.AddMacvlan("mv0", "wire0"); err != nil {
			return err
		}
		for _, l := range []string{"br0", pfNetdev, "wire0"} {
			if err := netops.SetLinkUp(l); err != nil {
				return err
			}
		}
		if err := netops.AddAddr("br0", &net.IPNet{IP: net.ParseIP("192.0.2.10"), Mask: net.CIDRMask(24, 32)}); err != nil {
			return err
		}
		return netops.SetDefaultRoute("br0", []net.IP{net.ParseIP("192.0.2.1")})
	})

	_, root := smallStandard(t) // ens8f0np0 is the shared-pool PF 0000:81:00.0
	var links []string
	var lowerOfMacvlan []string
	netnsutil.Do(t, n, func() error {
		var err error
		// /proc/thread-self/net is this thread's netns (/proc/self/net is the process's)
		if links, err = inventory.DefaultRouteNetdevs("/proc/thread-self", netops.LowerLinks); err != nil {
			return err
		}
		lowerOfMacvlan, err = netops.LowerLinks("mv0")
		return err
	})
	sort.Strings(links)
	if want := []string{"br0", pfNetdev}; !reflect.DeepEqual(links, want) {
		t.Fatalf("default-route netdevs %v, want %v", links, want)
	}
	if want := []string{"wire0"}; !reflect.DeepEqual(lowerOfMacvlan, want) {
		t.Errorf("netlink lower of a macvlan: %v, want %v", lowerOfMacvlan, want)
	}
	node, err := inventory.Discover(inventory.Options{SysfsRoot: root, DefaultRouteLinks: links, NetnsModeFlag: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := defaultRouteFunctions(node), map[string]string{"0000:81:00.0": ""}; !reflect.DeepEqual(got, want) {
		t.Fatalf("default-route functions %v, want %v", got, want)
	}

	// the kernel's sysfs of that netns, read by the sysfs model
	mnt := t.TempDir()
	netnsutil.Do(t, n, func() error { return unix.Mount("sysfs", mnt, "sysfs", unix.MS_RDONLY, "") })
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	fs := sysfs.New(mnt)
	for dev, want := range map[string][]string{"br0": {pfNetdev}, "mv0": {"wire0"}, pfNetdev: {}} {
		if got := fs.LowerNetdevs(dev); !reflect.DeepEqual(got, want) {
			t.Errorf("kernel sysfs: lower netdevs of %s = %v, want %v", dev, got, want)
		}
	}
	if got, want := inventory.ResolveLower(fs, []string{"br0"}), map[string]string{"br0": "br0", pfNetdev: "br0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("kernel sysfs: ResolveLower(br0) = %v, want %v", got, want)
	}
}
