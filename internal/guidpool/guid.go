// Package guidpool hands out InfiniBand GUIDs for VFs from configured ranges,
// unique across the cluster, with the IPAM's guarantees: it is the rdmanet
// IPAM allocator (internal/ipam) over a 64-bit GUID space mapped into IPv6
// addresses, so GUIDs live in the same IPAMBlock objects, with the same
// per-block compare-and-swap, node locks, idempotency per (container,
// interface), and the controller's garbage collection of allocations whose
// pod is gone. A GUID g is stored as the address MappedPrefix:g.
package guidpool

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// GUID is a 64-bit InfiniBand GUID.
type GUID uint64

// MappedPrefix is the upper 64 bits of the IPv6 addresses GUIDs are stored
// as in IPAM blocks: fdff:4755:4944:: ("GUID" in ASCII after a ULA byte),
// a range no IPAM network of a cluster would use for pods.
var MappedPrefix = [8]byte{0xfd, 0xff, 0x47, 0x55, 0x49, 0x44, 0x00, 0x00}

// ParseGUID reads a GUID the way ib-sriov-cni, ib-kubernetes and `ip link`
// write it (0c:42:a1:03:00:65:8e:81; also 0c42:a103:0065:8e81 as sysfs
// shows it, and 0x0c42a10300658e81).
func ParseGUID(s string) (GUID, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X") {
		var v uint64
		if _, err := fmt.Sscanf(t[2:], "%x", &v); err != nil || len(t) > 18 {
			return 0, fmt.Errorf("GUID %q: want 8 bytes like 0c:42:a1:03:00:65:8e:81", s)
		}
		return GUID(v), nil
	}
	if hw, err := net.ParseMAC(t); err == nil && len(hw) == 8 {
		return GUID(binary.BigEndian.Uint64(hw)), nil
	}
	h := strings.ReplaceAll(t, ":", "")
	if len(h) == 16 && strings.Count(t, ":") == 3 {
		var v uint64
		if _, err := fmt.Sscanf(h, "%016x", &v); err == nil {
			return GUID(v), nil
		}
	}
	return 0, fmt.Errorf("GUID %q: want 8 bytes like 0c:42:a1:03:00:65:8e:81", s)
}

// String is the colon form, 0c:42:a1:03:00:65:8e:81.
func (g GUID) String() string { return net.HardwareAddr(g.Bytes()).String() }

// Bytes is the GUID big-endian, for netlink.
func (g GUID) Bytes() []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(g))
	return b
}

// Zero and AllOnes are not assignable GUIDs (a fresh VF, and the value
// ib-sriov-cni resets VFs to).
const (
	Zero    GUID = 0
	AllOnes GUID = 0xffffffffffffffff
)

// Addr maps g into the IPv6 address space of the IPAM blocks.
func (g GUID) Addr() netip.Addr {
	var b [16]byte
	copy(b[:8], MappedPrefix[:])
	binary.BigEndian.PutUint64(b[8:], uint64(g))
	return netip.AddrFrom16(b)
}

// FromAddr is the GUID an IPAM address stands for; ok is false for an
// address outside MappedPrefix.
func FromAddr(a netip.Addr) (GUID, bool) {
	if !a.Is6() || a.Is4In6() {
		return 0, false
	}
	b := a.As16()
	if [8]byte(b[:8]) != MappedPrefix {
		return 0, false
	}
	return GUID(binary.BigEndian.Uint64(b[8:])), true
}
