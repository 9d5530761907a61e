package netops

import (
	"fmt"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
)

// stackedKinds are the link kinds whose IFLA_LINK is the lower device their
// traffic leaves through. A veth's IFLA_LINK is its peer (often in another
// netns), a tunnel's is only where its outer packets are routed from, so
// neither is followed.
var stackedKinds = map[string]bool{"vlan": true, "macvlan": true, "macvtap": true, "ipvlan": true, "ipvtap": true}

// LowerLinks returns the netdevs under each of names in the calling
// thread's netns, recursively and each once, in the order found: the ports
// of a bond, team or bridge (links whose master it is, netlink
// IFLA_MASTER) and the parent of a VLAN, macvlan or ipvlan (IFLA_LINK, when
// it is in the same netns) — the netdevs that carry traffic routed over
// names. A name the netns does not have is skipped (the caller may know it
// from elsewhere); names themselves are not in the result.
func LowerLinks(names ...string) ([]string, error) {
	ls, err := netlinksafe.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list netdevs: %w", err)
	}
	byName := make(map[string]netlink.Link, len(ls))
	byIndex := make(map[int]netlink.Link, len(ls))
	ports := map[int][]string{}
	for _, l := range ls {
		a := l.Attrs()
		byName[a.Name], byIndex[a.Index] = l, l
		if a.MasterIndex != 0 {
			ports[a.MasterIndex] = append(ports[a.MasterIndex], a.Name)
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	var out []string
	queue := append([]string(nil), names...)
	for len(queue) > 0 {
		l, ok := byName[queue[0]]
		queue = queue[1:]
		if !ok {
			continue
		}
		a := l.Attrs()
		below := append([]string(nil), ports[a.Index]...)
		if stackedKinds[l.Type()] && a.ParentIndex != 0 && a.NetNsID < 0 {
			if p, ok := byIndex[a.ParentIndex]; ok {
				below = append(below, p.Attrs().Name)
			}
		}
		for _, b := range below {
			if !seen[b] {
				seen[b] = true
				out = append(out, b)
				queue = append(queue, b)
			}
		}
	}
	return out, nil
}

// AddBridge creates a Linux bridge in the calling thread's netns (tests
// stack one over a simulated PF).
func AddBridge(name string) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
		return fmt.Errorf("ip link add %s type bridge: %w", name, err)
	}
	return nil
}

// SetLinkMaster enslaves name to master (a bridge or bond), like
// `ip link set <name> master <master>`.
func SetLinkMaster(name, master string) error {
	l, err := byName(name)
	if err != nil {
		return err
	}
	m, err := byName(master)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetMasterByIndex(l, m.Attrs().Index); err != nil {
		return fmt.Errorf("ip link set %s master %s: %w", name, master, err)
	}
	return nil
}
