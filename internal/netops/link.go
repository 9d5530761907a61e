package netops

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// ErrLinkNotFound is wrapped by link lookups that find nothing.
var ErrLinkNotFound = errors.New("link not found")

// Link is what the plugins need to know about a netdev.
type Link struct {
	Name  string
	Index int
	MAC   net.HardwareAddr
	MTU   int
	Up    bool // administratively up (IFF_UP)
	Kind  string
}

func toLink(l netlink.Link) Link {
	a := l.Attrs()
	return Link{Name: a.Name, Index: a.Index, MAC: a.HardwareAddr, MTU: a.MTU, Up: a.Flags&net.FlagUp != 0, Kind: l.Type()}
}

func byName(name string) (netlink.Link, error) {
	l, err := netlinksafe.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("netdev %q: %w", name, ErrLinkNotFound)
		}
		return nil, fmt.Errorf("look up netdev %q: %w", name, err)
	}
	return l, nil
}

// LinkByName looks a netdev up in the calling thread's netns.
func LinkByName(name string) (Link, error) {
	l, err := byName(name)
	if err != nil {
		return Link{}, err
	}
	return toLink(l), nil
}

// Links lists the netdevs of the calling thread's netns.
func Links() ([]Link, error) {
	ls, err := netlinksafe.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list netdevs: %w", err)
	}
	out := make([]Link, 0, len(ls))
	for _, l := range ls {
		out = append(out, toLink(l))
	}
	return out, nil
}

// LinkByMAC finds the netdev with the given hardware address.
func LinkByMAC(mac net.HardwareAddr) (Link, error) {
	ls, err := Links()
	if err != nil {
		return Link{}, err
	}
	for _, l := range ls {
		if l.MAC.String() == mac.String() {
			return l, nil
		}
	}
	return Link{}, fmt.Errorf("netdev with MAC %s: %w", mac, ErrLinkNotFound)
}

// SetLinkNetns moves a netdev of the calling thread's netns into target.
func SetLinkNetns(name string, target ns.NetNS) error {
	l, err := byName(name)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetNsFd(l, int(target.Fd())); err != nil {
		return fmt.Errorf("ip link set %s netns %s: %w", name, target.Path(), err)
	}
	return nil
}

// RenameLink renames a netdev (it must be down for the kernel to accept).
func RenameLink(oldName, newName string) error {
	if oldName == newName {
		return nil
	}
	l, err := byName(oldName)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetName(l, newName); err != nil {
		return fmt.Errorf("ip link set %s name %s: %w", oldName, newName, err)
	}
	return nil
}

// SetLinkMTU sets a netdev's MTU.
func SetLinkMTU(name string, mtu int) error {
	l, err := byName(name)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("ip link set %s mtu %d: %w", name, mtu, err)
	}
	return nil
}

// SetLinkMAC sets a netdev's hardware address.
func SetLinkMAC(name string, mac net.HardwareAddr) error {
	l, err := byName(name)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetHardwareAddr(l, mac); err != nil {
		return fmt.Errorf("ip link set %s address %s: %w", name, mac, err)
	}
	return nil
}

// SetLinkUp brings a netdev up; SetLinkDown takes it down.
func SetLinkUp(name string) error { return setUpDown(name, true) }

// SetLinkDown takes a netdev down.
func SetLinkDown(name string) error { return setUpDown(name, false) }

func setUpDown(name string, up bool) error {
	l, err := byName(name)
	if err != nil {
		return err
	}
	if up {
		err = netlink.LinkSetUp(l)
	} else {
		err = netlink.LinkSetDown(l)
	}
	if err != nil {
		state := map[bool]string{true: "up", false: "down"}[up]
		return fmt.Errorf("ip link set %s %s: %w", name, state, err)
	}
	return nil
}

// FlushAddrs removes every address of a netdev.
func FlushAddrs(name string) error {
	l, err := byName(name)
	if err != nil {
		return err
	}
	addrs, err := netlinksafe.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("ip addr show %s: %w", name, err)
	}
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		if err := netlink.AddrDel(l, &a); err != nil {
			return fmt.Errorf("ip addr del %s dev %s: %w", a.IPNet, name, err)
		}
	}
	return nil
}

// Addrs lists a netdev's addresses (link-local IPv6 excluded).
func Addrs(name string) ([]net.IPNet, error) {
	l, err := byName(name)
	if err != nil {
		return nil, err
	}
	addrs, err := netlinksafe.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("ip addr show %s: %w", name, err)
	}
	var out []net.IPNet
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, *a.IPNet)
	}
	return out, nil
}

// AddAddr adds an address (e.g. 192.168.2.10/24) to a netdev of the
// calling thread's netns (the simulated-node demo gives its PF stand-ins
// the addresses a node's RoCE NICs carry).
func AddAddr(name string, addr *net.IPNet) error {
	l, err := byName(name)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: addr}); err != nil {
		return fmt.Errorf("ip addr add %s dev %s: %w", addr, name, err)
	}
	return nil
}

// AddVeth creates a veth pair in the calling thread's netns: name stays
// here, peer is created and then moved into peerNS (nil keeps it here).
// MAC may be nil for a kernel-chosen address.
func AddVeth(name, peer string, mac net.HardwareAddr, peerNS ns.NetNS) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if mac != nil {
		attrs.HardwareAddr = mac
	}
	v := &netlink.Veth{LinkAttrs: attrs, PeerName: peer}
	if peerNS != nil {
		v.PeerNamespace = netlink.NsFd(int(peerNS.Fd()))
	}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("ip link add %s type veth peer name %s: %w", name, peer, err)
	}
	return nil
}

// AddMacvlan creates a macvlan child of parent in bridge mode (tests use it
// to compare with the upstream plugin's work).
func AddMacvlan(name, parent string) error {
	p, err := byName(parent)
	if err != nil {
		return err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	attrs.ParentIndex = p.Attrs().Index
	if err := netlink.LinkAdd(&netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}); err != nil {
		return fmt.Errorf("ip link add %s link %s type macvlan mode bridge: %w", name, parent, err)
	}
	return nil
}

// DeleteLink deletes a netdev; a missing one is not an error.
func DeleteLink(name string) error {
	l, err := byName(name)
	if errors.Is(err, ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("ip link del %s: %w", name, err)
	}
	return nil
}

// Routes lists the destinations of a netdev's routes in the main table
// ("default" for a default route).
func Routes(name string) ([]string, error) {
	l, err := byName(name)
	if err != nil {
		return nil, err
	}
	rs, err := netlinksafe.RouteList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("ip route show dev %s: %w", name, err)
	}
	var out []string
	for _, r := range rs {
		if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" || r.Dst.String() == "::/0" {
			out = append(out, "default")
			continue
		}
		if r.Dst.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, r.Dst.String())
	}
	return out, nil
}
