package netops_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// TestIPoIBChildRequest compares the exact RTM_NEWLINK request of the
// kernel path (netlink.IPoIB: parent ifindex, PKey with the full-membership
// bit, mode, umcast, MTU) and its `ip link` form, which the recorder logs.
func TestIPoIBChildRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		child   netops.IPoIBChild
		parent  int
		want    netlink.IPoIB
		wantCmd string
	}{
		{name: "PKey child, membership bit added", child: netops.IPoIBChild{Name: "ib1234", Parent: "ibp193s0f0", PKey: 0x0012, Mode: "datagram", Umcast: true, MTU: 2044},
			parent: 7, want: netlink.IPoIB{Pkey: 0x8012, Mode: netlink.IPOIB_MODE_DATAGRAM, Umcast: 1},
			wantCmd: "ip link add ib1234 link ibp193s0f0 mtu 2044 type ipoib pkey 0x8012 mode datagram umcast 1"},
		{name: "full member PKey kept", child: netops.IPoIBChild{Name: "c", Parent: "ib0", PKey: 0x8001, Mode: "connected", MTU: 65520},
			parent: 3, want: netlink.IPoIB{Pkey: 0x8001, Mode: netlink.IPOIB_MODE_CONNECTED},
			wantCmd: "ip link add c link ib0 mtu 65520 type ipoib pkey 0x8001 mode connected umcast 0"},
		{name: "default partition, kernel MTU, default mode", child: netops.IPoIBChild{Name: "c", Parent: "ib0", PKey: 0x7fff, Umcast: true},
			parent: 2, want: netlink.IPoIB{Pkey: 0xffff, Mode: netlink.IPOIB_MODE_DATAGRAM, Umcast: 1},
			wantCmd: "ip link add c link ib0 type ipoib pkey 0xffff mode datagram umcast 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.child.Validate(); err != nil {
				t.Fatal(err)
			}
			got := tc.child.Request(tc.parent)
			want := tc.want
			want.LinkAttrs = netlink.NewLinkAttrs()
			want.Name, want.ParentIndex, want.MTU = tc.child.Name, tc.parent, tc.child.MTU
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("request\n got %+v\nwant %+v", *got, want)
			}
			if got.Type() != "ipoib" {
				t.Errorf("link kind %q", got.Type())
			}
			if c := tc.child.Command(); c != tc.wantCmd {
				t.Errorf("command %q, want %q", c, tc.wantCmd)
			}
		})
	}
}

func TestIPoIBChildValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		child netops.IPoIBChild
		want  string
	}{
		{name: "PKey 0", child: netops.IPoIBChild{Name: "c", Parent: "ib0", PKey: 0}, want: "no partition number"},
		{name: "PKey 0x8000", child: netops.IPoIBChild{Name: "c", Parent: "ib0", PKey: 0x8000}, want: "no partition number"},
		{name: "bad mode", child: netops.IPoIBChild{Name: "c", Parent: "ib0", PKey: 1, Mode: "cm"}, want: `mode "cm"`},
		{name: "negative MTU", child: netops.IPoIBChild{Name: "c", Parent: "ib0", PKey: 1, MTU: -1}, want: "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.child.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestIPoIBKernelPath runs the real path in a netns: a veth is no IPoIB
// parent (ErrNotIPoIB), and creating a child through the kernel fails
// naming the request (this kernel has no ib_ipoib module; with one, a veth
// parent is still refused by the ipoib link type).
func TestIPoIBKernelPath(t *testing.T) {
	netnsutil.RequireRoot(t)
	n := netnsutil.NewNS(t)
	netnsutil.AddVeth(t, n, "ibstand0", nil, "ibstand0-peer", n)
	k := netops.Netlink{}
	netnsutil.Do(t, n, func() error {
		if _, err := k.IPoIBParent("ibstand0"); !errors.Is(err, netops.ErrNotIPoIB) {
			return fmt.Errorf("IPoIBParent(veth) = %v, want ErrNotIPoIB", err)
		}
		if _, err := k.IPoIBParent("nope0"); !errors.Is(err, netops.ErrLinkNotFound) {
			return fmt.Errorf("IPoIBParent(missing) = %v, want ErrLinkNotFound", err)
		}
		err := k.AddIPoIBChild(netops.IPoIBChild{Name: "ibc0", Parent: "ibstand0", PKey: 0x12, Mode: netops.IPoIBDatagram})
		if err == nil {
			return errors.New("the kernel created an IPoIB child of a veth")
		}
		if !strings.Contains(err.Error(), "type ipoib pkey 0x8012") {
			return fmt.Errorf("error %q does not name the request", err)
		}
		if !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENODEV) {
			t.Logf("kernel error: %v", err)
		}
		if err := k.DelIPoIBChild("ibc0"); err != nil {
			return fmt.Errorf("DelIPoIBChild of a missing child: %v", err)
		}
		if err := k.DelIPoIBChild("ibstand0"); !errors.Is(err, netops.ErrNotIPoIB) {
			return fmt.Errorf("DelIPoIBChild(veth) = %v, want ErrNotIPoIB (never delete another plugin's link)", err)
		}
		return nil
	})
}

// TestRecorderIPoIB: the recorder records the request, logs it, and stands
// in for the child with a macvlan of the parent stand-in.
func TestRecorderIPoIB(t *testing.T) {
	netnsutil.RequireRoot(t)
	n := netnsutil.NewNS(t)
	netnsutil.AddVeth(t, n, "ibp193s0f0", nil, "ib-wire", n)
	netnsutil.SetMTU(t, n, "ibp193s0f0", 4092)
	r := netops.NewRecorder(filepath.Join(t.TempDir(), "nic.json"))
	if err := r.SetIPoIBParent("ibp193s0f0", 0x8001, netops.IPoIBConnected); err != nil {
		t.Fatal(err)
	}
	if err := r.SetIPoIBParent("x", 1, "cm"); err == nil {
		t.Error("SetIPoIBParent accepted mode cm")
	}
	child := netops.IPoIBChild{Name: "ibtmp1", Parent: "ibp193s0f0", PKey: 0x0001, Mode: netops.IPoIBConnected, Umcast: true, MTU: 2044}
	netnsutil.Do(t, n, func() error {
		p, err := r.IPoIBParent("ibp193s0f0")
		if err != nil {
			return err
		}
		if p.PKey != 0x8001 || p.Mode != netops.IPoIBConnected || p.MTU != 4092 {
			return fmt.Errorf("parent %+v", p)
		}
		if err := r.AddIPoIBChild(child); err != nil {
			return err
		}
		l, err := netops.LinkByName("ibtmp1")
		if err != nil {
			return err
		}
		if l.Kind != r.ChildKind() || l.MTU != 2044 {
			return fmt.Errorf("stand-in %+v", l)
		}
		if err := r.DelIPoIBChild("ib-wire"); !errors.Is(err, netops.ErrNotIPoIB) {
			return fmt.Errorf("DelIPoIBChild(veth) = %v, want ErrNotIPoIB", err)
		}
		if err := r.DelIPoIBChild("ibtmp1"); err != nil {
			return err
		}
		return r.DelIPoIBChild("ibtmp1") // idempotent
	})
	reqs, err := r.IPoIBRequests()
	if err != nil {
		t.Fatal(err)
	}
	want := child
	want.PKey = 0x8001
	if len(reqs) != 1 || reqs[0] != want {
		t.Errorf("requests %+v, want [%+v]", reqs, want)
	}
	log, _ := r.Log()
	wantLog := []string{"ip link add ibtmp1 link ibp193s0f0 mtu 2044 type ipoib pkey 0x8001 mode connected umcast 1", "ip link del ibtmp1"}
	if !reflect.DeepEqual(log, wantLog) {
		t.Errorf("log %q, want %q", log, wantLog)
	}
}
