package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Whereabouts reads range, range_start, range_end and gateway with
// k8s.io/utils/net's ParseIPSloppy/ParseCIDRSloppy: Go's parser from before
// Go 1.17, which takes IPv4 octets with leading zeroes as decimal
// ("00192.00168.1.5" is 192.168.1.5; upstream's tests accept it on purpose).
// parseAddrSloppy and parsePrefixSloppy read the same grammar into netip
// values and report whether a leading zero was read, so that Parse can warn:
// other tools (inet_aton, ping) read "010" as octal 8.

// errNotAddr is the error of an address the sloppy grammar refuses.
var errNotAddr = errors.New("not an IP address")

// parseAddrSloppy parses an IP address as ParseIPSloppy does. IPv4 in IPv6
// ("::ffff:10.0.0.1") is returned unmapped, as Whereabouts treats it (To4).
func parseAddrSloppy(s string) (a netip.Addr, leadingZero bool, err error) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.':
			return parseIPv4Sloppy(s)
		case ':':
			return parseIPv6Sloppy(s)
		}
	}
	return netip.Addr{}, false, errNotAddr
}

// parseIPv4Sloppy: exactly four dot-separated decimal fields, each at most
// 255, any number of digits.
func parseIPv4Sloppy(s string) (netip.Addr, bool, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return netip.Addr{}, false, errNotAddr
	}
	var b [4]byte
	lz := false
	for i, p := range parts {
		n, ok := decimal(p, 0xFF)
		if !ok {
			return netip.Addr{}, false, errNotAddr
		}
		if len(p) > 1 && p[0] == '0' {
			lz = true
		}
		b[i] = byte(n)
	}
	return netip.AddrFrom4(b), lz, nil
}

// parseIPv6Sloppy: netip's grammar, plus the old parser's leniencies: a
// trailing dotted IPv4 part with leading zeroes and hex groups of more than
// four digits whose value fits 16 bits. Zones are refused, as there.
func parseIPv6Sloppy(s string) (netip.Addr, bool, error) {
	if strings.ContainsRune(s, '%') {
		return netip.Addr{}, false, errNotAddr
	}
	lz := false
	groups := strings.Split(s, ":")
	last := len(groups) - 1
	if strings.Contains(groups[last], ".") {
		v4, z, err := parseIPv4Sloppy(groups[last])
		if err != nil {
			return netip.Addr{}, false, err
		}
		lz = z
		groups[last] = v4.String()
	}
	for i, g := range groups {
		if len(g) > 4 && !strings.Contains(g, ".") {
			t := strings.TrimLeft(g, "0")
			if len(t) > 4 {
				return netip.Addr{}, false, errNotAddr
			}
			groups[i] = t
			if t == "" {
				groups[i] = "0"
			}
		}
	}
	a, err := netip.ParseAddr(strings.Join(groups, ":"))
	if err != nil {
		return netip.Addr{}, false, errNotAddr
	}
	return a.Unmap(), lz, nil
}

// parsePrefixSloppy parses "addr/bits" as ParseCIDRSloppy does: the address
// as written (host bits kept) and its masked prefix. The prefix length is
// decimal and may carry leading zeroes.
func parsePrefixSloppy(s string) (addr netip.Addr, p netip.Prefix, leadingZero bool, err error) {
	a, m, ok := strings.Cut(s, "/")
	if !ok {
		return netip.Addr{}, netip.Prefix{}, false, errors.New("no prefix length (/n)")
	}
	addr, leadingZero, err = parseAddrSloppy(a)
	if err != nil {
		return netip.Addr{}, netip.Prefix{}, false, err
	}
	bitLen := addr.BitLen()
	if strings.Contains(a, ":") {
		bitLen = 128 // "::ffff:10.0.0.0/104" is an IPv6 prefix, as there
	}
	bits, okBits := decimal(m, bitLen)
	if !okBits {
		return netip.Addr{}, netip.Prefix{}, false, fmt.Errorf("prefix length %q is not a number between 0 and %d", m, bitLen)
	}
	if bitLen == 128 && addr.Is4() {
		// A mapped IPv4 prefix: keep it in IPv6 form so that its length stays meaningful.
		addr = netip.AddrFrom16(addr.As16())
	}
	return addr, netip.PrefixFrom(addr, bits).Masked(), leadingZero, nil
}

// decimal parses a non-empty string of decimal digits no larger than max
// (leading zeroes allowed, as the old parser's dtoi allows them).
func decimal(s string, max int) (int, bool) {
	if s == "" {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	t := strings.TrimLeft(s, "0")
	if t == "" {
		return 0, true
	}
	if len(t) > 6 {
		return 0, false
	}
	n, err := strconv.Atoi(t)
	if err != nil || n > max {
		return 0, false
	}
	return n, true
}
