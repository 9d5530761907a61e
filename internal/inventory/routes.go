package inventory

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// DefaultRouteLinks reads <procRoot>/net/route and <procRoot>/net/ipv6_route
// (procRoot normally /proc) and returns the interfaces that carry a default
// route, in the reading process's network namespace. A missing ipv6_route
// (IPv6 disabled) is not an error.
func DefaultRouteLinks(procRoot string) ([]string, error) {
	if procRoot == "" {
		procRoot = "/proc"
	}
	links := map[string]bool{}
	f, err := os.Open(filepath.Join(procRoot, "net/route"))
	if err != nil {
		return nil, fmt.Errorf("read default route: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for first := true; sc.Scan(); first = false {
		fields := strings.Fields(sc.Text())
		if first || len(fields) < 8 {
			continue // header
		}
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if fields[1] == "00000000" && fields[7] == "00000000" {
			links[fields[0]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s/net/route: %w", procRoot, err)
	}
	if f6, err := os.Open(filepath.Join(procRoot, "net/ipv6_route")); err == nil {
		defer f6.Close()
		sc := bufio.NewScanner(f6)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// dst dstlen src srclen nexthop metric refcnt use flags iface
			if len(fields) >= 10 && fields[0] == strings.Repeat("0", 32) && fields[1] == "00" && fields[9] != "lo" {
				links[fields[9]] = true
			}
		}
	}
	out := make([]string, 0, len(links))
	for l := range links {
		out = append(out, l)
	}
	sort.Strings(out)
	return out, nil
}

// DefaultRouteNetdevs is DefaultRouteLinks plus every netdev below those
// links that lower reports (netops.LowerLinks: netlink's master and link
// relations in the caller's netns), so that a PF carrying the default route
// under a bond, a VLAN or a bridge is known even where the sysfs model is
// not the live one.
func DefaultRouteNetdevs(procRoot string, lower func(names ...string) ([]string, error)) ([]string, error) {
	links, err := DefaultRouteLinks(procRoot)
	if err != nil || lower == nil || len(links) == 0 {
		return links, err
	}
	below, err := lower(links...)
	if err != nil {
		return nil, fmt.Errorf("resolve the default route's devices %v to the netdevs under them: %w", links, err)
	}
	return append(links, below...), nil
}

// ResolveLower maps each of links, and every netdev below it in the sysfs
// model (FS.LowerNetdevs, recursively: a bridge over a bond over two PFs),
// to the link it was found under (a link maps to itself).
func ResolveLower(fs sysfs.FS, links []string) map[string]string {
	via := map[string]string{}
	for _, l := range links {
		if _, ok := via[l]; ok {
			continue
		}
		via[l] = l
		for queue := []string{l}; len(queue) > 0; queue = queue[1:] {
			for _, lo := range fs.LowerNetdevs(queue[0]) {
				if _, ok := via[lo]; !ok {
					via[lo] = l
					queue = append(queue, lo)
				}
			}
		}
	}
	return via
}
