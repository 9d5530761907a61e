package ipam

// Reading the ipam object as Whereabouts reads it: the node config file's
// fields under the network's (mergeNodeConfig), the unreleased "ranges" key
// (historicRanges), and each range entry's CIDR or start-end, bounds,
// excludes and slice size (parseRange), with a warning wherever Whereabouts'
// reading differs from what the writer probably meant.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// namedRange is one range entry and where it was written.
type namedRange struct {
	field string // prefix of the entry's field names ("", "ipRanges[1].")
	raw   RawRange
	// sloppyBounds: range_start/range_end are read as Whereabouts reads the
	// top-level ones (leading zeroes allowed, unparsable ones ignored);
	// entries of ipRanges decode them strictly (net.IP), and Whereabouts
	// refuses the whole config when they do not parse.
	sloppyBounds bool
}

// mergeNodeConfig returns the network config with every range, gateway,
// route, DNS and slice field it leaves empty taken from the node config.
func mergeNodeConfig(ipam, node *RawIPAM) RawIPAM {
	eff := *ipam
	set := func(dst *string, src string) {
		if *dst == "" {
			*dst = src
		}
	}
	set(&eff.Range, node.Range)
	set(&eff.RangeStart, node.RangeStart)
	set(&eff.RangeEnd, node.RangeEnd)
	set(&eff.Gateway, node.Gateway)
	set(&eff.NodeSliceSize, node.NodeSliceSize)
	if len(eff.Exclude) == 0 {
		eff.Exclude = node.Exclude
	}
	if len(eff.IPRanges) == 0 {
		eff.IPRanges = node.IPRanges
	}
	if len(eff.Routes) == 0 {
		eff.Routes = node.Routes
	}
	if len(eff.DNS.Nameservers) == 0 {
		eff.DNS.Nameservers = node.DNS.Nameservers
	}
	set(&eff.DNS.Domain, node.DNS.Domain)
	if len(eff.DNS.Search) == 0 {
		eff.DNS.Search = node.DNS.Search
	}
	if len(eff.DNS.Options) == 0 {
		eff.DNS.Options = node.DNS.Options
	}
	return eff
}

// historicRanges reads the "ranges" key. Whereabouts never released it (an
// early, unmerged name of ipRanges; host-local's key of the same name has
// another shape) and ignores it. Next to range or ipRanges it is ignored
// here too. Alone, Whereabouts would hand out no address and the main
// plugin's ADD fails, so rdmanet reads entries shaped like ipRanges entries
// as ipRanges (with a warning) and refuses any other shape.
func historicRanges(raw json.RawMessage, haveRanges bool, warn func(field, value, msg string), fail func(field, value, rule, fix string, err error) error) ([]namedRange, error) {
	if haveRanges {
		warn("ranges", "", `ignored, as Whereabouts ignores it: it is not a Whereabouts key (ipRanges is); remove it or move its entries into "ipRanges"`)
		return nil, nil
	}
	var entries []RawRange
	if err := json.Unmarshal(raw, &entries); err != nil || len(entries) == 0 || slices.ContainsFunc(entries, func(r RawRange) bool { return r.Range == "" }) {
		return nil, fail("ranges", string(raw), `not a Whereabouts key (host-local's "ranges" is a list of lists of {"subnet": ...}); Whereabouts ignores it, hands out no address, and the main plugin's ADD fails with "IPAM plugin returned missing IP config"`,
			`write "ipRanges": [{"range": "<cidr>", "range_start": ..., "range_end": ..., "exclude": [...]}]`, err)
	}
	warn("ranges", "", `read as "ipRanges": Whereabouts v0.9 ignores this key (an early name of ipRanges that was never released), hands out no address, and the main plugin's ADD fails; rename it to "ipRanges"`)
	out := make([]namedRange, len(entries))
	for i, rr := range entries {
		out[i] = namedRange{field: fmt.Sprintf("ranges[%d].", i), raw: rr}
	}
	return out, nil
}

// parseRange parses one range entry as Whereabouts' config loader and its
// allocator (iphelpers.GetIPRange) read it: the CIDR or "start-end/prefix",
// range_start, range_end and exclude. isolated is !enable_overlapping_ranges.
func parseRange(nr namedRange, sliceSize string, isolated bool, warn func(field, value, msg string), fail func(field, value, rule, fix string, err error) error) (*Range, error) {
	rr, fieldPrefix := nr.raw, nr.field
	r := &Range{Spec: rr.Range, Isolated: isolated}
	field := fieldPrefix + "range"
	if rr.Range == "" {
		return nil, fail(field, "", "missing", `set it to a CIDR such as "10.60.0.0/16" or "10.60.0.10-10.60.0.200/16"`, nil)
	}
	// start and end are the bounds as Whereabouts keeps them; each takes
	// effect only when it lies among the usable addresses (below).
	var start, end netip.Addr
	var startField, endField string
	var p netip.Prefix
	if left, right, dash := strings.Cut(rr.Range, "-"); dash {
		a, lz, err := parseAddrSloppy(left)
		if err != nil {
			return nil, fail(field, rr.Range, fmt.Sprintf("range start %q is not an IP address", left), `write it as "10.60.0.10-10.60.0.200/16"`, err)
		}
		last, prefix, lz2, err := parsePrefixSloppy(right)
		if err != nil {
			return nil, fail(field, rr.Range, fmt.Sprintf("%q is not a CIDR (a start-end range is written start-end/prefix)", right), `write it as "10.60.0.10-10.60.0.200/16"`, err)
		}
		if !prefix.Contains(a) {
			return nil, fail(field, rr.Range, fmt.Sprintf("range start %s is outside the CIDR %s (Whereabouts refuses it too)", a, prefix),
				"make the start address lie inside the CIDR written after the dash", nil)
		}
		if lz || lz2 {
			warn(field, rr.Range, leadingZeroWarning(netip.Addr{}))
		}
		for _, b := range []struct{ name, value string }{{"range_start", rr.RangeStart}, {"range_end", rr.RangeEnd}} {
			if b.value != "" {
				warn(fieldPrefix+b.name, b.value, fmt.Sprintf("ignored: the start-end written in range %q wins, as in Whereabouts; set the bounds in one place only", rr.Range))
			}
		}
		p, start, end = prefix, a, last
		startField, endField = field, field
	} else {
		host, prefix, lz, err := parsePrefixSloppy(rr.Range)
		if err != nil {
			return nil, fail(field, rr.Range, "not a CIDR", `write it as "10.60.0.0/16" or "fd00:60::/64"`, err)
		}
		if lz {
			warn(field, rr.Range, leadingZeroWarning(prefix.Addr()))
		}
		p = prefix
		for _, b := range []struct {
			name, text string
			dst        *netip.Addr
		}{{"range_start", rr.RangeStart, &start}, {"range_end", rr.RangeEnd, &end}} {
			if b.text == "" {
				continue
			}
			name := fieldPrefix + b.name
			if nr.sloppyBounds {
				a, lz, err := parseAddrSloppy(b.text)
				if err != nil {
					warn(name, b.text, "not an IP address: ignored, as Whereabouts ignores it; write a plain address such as 10.60.0.10")
					continue
				}
				if lz {
					warn(name, b.text, leadingZeroWarning(a))
				}
				*b.dst = a
			} else {
				ip := net.ParseIP(b.text)
				if ip == nil {
					return nil, fail(name, b.text, "not an IP address (Whereabouts decodes the bounds of ipRanges entries strictly and refuses the whole config: no leading zeroes, no zone)",
						"write a plain address such as 10.60.0.10", nil)
				}
				a, _ := netip.AddrFromSlice(ip)
				*b.dst = a.Unmap()
			}
		}
		startField, endField = fieldPrefix+"range_start", fieldPrefix+"range_end"
		if !start.IsValid() && host != p.Addr() && host != p.Addr().Next() {
			end := lastAddr(p)
			if p.Addr().BitLen()-p.Bits() >= 2 {
				end = end.Prev()
			}
			warn(field, rr.Range, fmt.Sprintf("the address part %s is not where allocation starts: Whereabouts reads the range as %s and starts at its first usable address; to start at %s, set \"range_start\" or write %q",
				host, p, host, host.String()+"-"+end.String()+"/"+strconv.Itoa(p.Bits())))
		}
	}
	if p.Addr().Zone() != "" {
		return nil, fail(field, rr.Range, "zoned addresses are not allowed", "drop the %zone", nil)
	}
	r.Prefix = p
	network, last := p.Addr(), lastAddr(p)
	r.First, r.Last = network, last
	if hostBits := network.BitLen() - p.Bits(); hostBits >= 2 {
		// Whereabouts never hands out the first and the last address of a
		// CIDR, in IPv4 (network, broadcast) and IPv6 alike.
		r.First, r.Last = network.Next(), last.Prev()
	}
	// Deliberate: /31, /32, /127 and /128 are served whole (RFC 3021);
	// Whereabouts fails every ADD from them ("net mask is too short").

	// A bound takes effect only among the usable addresses, and range_end
	// only at or after the effective start (Whereabouts' GetIPRange ignores
	// any other silently; rdmanet says so).
	inside := func(a netip.Addr) bool {
		return a.BitLen() == r.First.BitLen() && !a.Less(r.First) && !r.Last.Less(a)
	}
	if start.IsValid() {
		if inside(start) {
			r.First = start
		} else if start != network {
			warn(startField, start.String(), fmt.Sprintf("range_start is not a usable address of %s (%s-%s): ignored, as Whereabouts ignores it; allocation starts at %s", p, r.First, r.Last, r.First))
		}
	}
	if end.IsValid() {
		if inside(end) {
			r.Last = end
		} else if end != last {
			warn(endField, end.String(), fmt.Sprintf("range_end is not a usable address of %s at or after the start (%s-%s): ignored, as Whereabouts ignores it; allocation ends at %s", p, r.First, r.Last, r.Last))
		}
	}

	for i, ex := range rr.Exclude {
		name := fmt.Sprintf("%sexclude[%d]", fieldPrefix, i)
		e, err := parseExclude(ex)
		if err != nil {
			return nil, fail(name, ex, "not a CIDR or IP address (Whereabouts accepts the config, then fails every ADD: \"could not parse exclude range\"; it reads excludes strictly, without leading zeroes)",
				`write it as "10.60.0.0/24" or "10.60.0.7"`, err)
		}
		if e.Addr().BitLen() != p.Addr().BitLen() || e.Addr().Is4In6() != p.Addr().Is4In6() {
			warn(name, ex, fmt.Sprintf("address family differs from range %q: it excludes nothing there (Whereabouts ignores it too); put each family's excludes in its own ipRanges entry", rr.Range))
			continue
		}
		r.Exclude = append(r.Exclude, e)
	}
	r.Exclude = normalizeExcludes(r.Exclude)

	bits := defaultBlockBits4
	if p.Addr().Is6() {
		bits = defaultBlockBits6
	}
	if sliceSize != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(sliceSize, "/"))
		if err != nil || n < 0 || n > p.Addr().BitLen() {
			return nil, fail("node_slice_size", sliceSize, "not a prefix length of the range's family (Whereabouts accepts it, then its node slice controller creates no slice and every ADD fails)", `write it as "/26"`, err)
		}
		if maxBits := p.Addr().BitLen() - maxBlockHostBits; n < maxBits {
			// Deliberate: one block object holds at most 4096 addresses.
			warn("node_slice_size", sliceSize, fmt.Sprintf("a node's block holds at most %d addresses: nodes claim /%d blocks of %s instead (as many as they need), where Whereabouts would give each node one %s slice",
				1<<maxBlockHostBits, maxBits, p, sliceSize))
			n = maxBits
		}
		bits = n
	}
	// An isolated pool's blocks lie inside its range. Blocks of a network
	// shared by overlapping ranges have the slice size even when the range
	// is smaller, so every range of the network claims the same aligned
	// block (one name, one create that can win) for the same addresses.
	r.BlockBits = bits
	if isolated {
		r.BlockBits = max(bits, p.Bits())
	}
	return r, nil
}

// parseExclude reads an exclude entry as Whereabouts' allocator does: a CIDR
// (net.ParseCIDR, strict), else one address as its /32 or /128.
func parseExclude(s string) (netip.Prefix, error) {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		ip := net.ParseIP(s)
		if ip == nil {
			return netip.Prefix{}, err
		}
		bits := "/128"
		if ip.To4() != nil {
			bits = "/32"
		}
		if _, n, err = net.ParseCIDR(s + bits); err != nil {
			return netip.Prefix{}, err
		}
	}
	a, _ := netip.AddrFromSlice(n.IP)
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a, ones), nil
}

// leadingZeroWarning is the warning for an IPv4 address written with
// leading zeroes.
func leadingZeroWarning(a netip.Addr) string {
	s := "IPv4 with leading zeroes, read as decimal as Whereabouts reads it; other tools (inet_aton, ping) read 010 as octal 8"
	if a.IsValid() {
		return s + "; write " + a.String()
	}
	return s + "; write the address without them"
}

// normalizeExcludes sorts prefixes and drops those nested in another.
func normalizeExcludes(in []netip.Prefix) []netip.Prefix {
	slices.SortFunc(in, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var out []netip.Prefix
	for _, p := range in {
		if n := len(out); n > 0 && out[n-1].Overlaps(p) {
			continue // sorted: the earlier (shorter or equal) prefix contains p
		}
		out = append(out, p)
	}
	return out
}
