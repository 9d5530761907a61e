package netops

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// SetDefaultRoute makes ifname carry the default route of the current
// network namespace: every default route of the gateways' families is
// removed and one via each gateway on ifname is added. Used for an
// attachment's "default-route" request (NPWG gateway selection).
func SetDefaultRoute(ifname string, gws []net.IP) error {
	l, err := byName(ifname)
	if err != nil {
		return err
	}
	for _, gw := range gws {
		family := netlink.FAMILY_V4
		dst := &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
		if gw.To4() == nil {
			family = netlink.FAMILY_V6
			dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		routes, err := netlink.RouteList(nil, family)
		if err != nil {
			return fmt.Errorf("list default routes: %w", err)
		}
		for _, r := range routes {
			if r.Dst != nil && !isDefault(r.Dst) {
				continue
			}
			if err := netlink.RouteDel(&r); err != nil {
				return fmt.Errorf("remove default route via %v: %w", r.Gw, err)
			}
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: gw}); err != nil {
			return fmt.Errorf("add default route via %s dev %s: %w", gw, ifname, err)
		}
	}
	return nil
}

func isDefault(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0
}
