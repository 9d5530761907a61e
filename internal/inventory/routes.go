package inventory

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
