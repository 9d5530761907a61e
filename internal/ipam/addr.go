package ipam

import (
	"math/big"
	"net/netip"
)

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	a := p.Addr()
	if a.Is4() {
		b := a.As4()
		hostBits := 32 - p.Bits()
		for i := 3; i >= 0 && hostBits > 0; i-- {
			n := min(hostBits, 8)
			b[i] |= byte(1<<n - 1)
			hostBits -= n
		}
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	hostBits := 128 - p.Bits()
	for i := 15; i >= 0 && hostBits > 0; i-- {
		n := min(hostBits, 8)
		b[i] |= byte(1<<n - 1)
		hostBits -= n
	}
	return netip.AddrFrom16(b)
}

// addrBig is a's value as an integer.
func addrBig(a netip.Addr) *big.Int {
	s := a.AsSlice()
	return new(big.Int).SetBytes(s)
}

// countBetween is the number of addresses in [first, last] (0 when last < first).
func countBetween(first, last netip.Addr) *big.Int {
	if last.Less(first) {
		return new(big.Int)
	}
	n := new(big.Int).Sub(addrBig(last), addrBig(first))
	return n.Add(n, big.NewInt(1))
}

// addrMax returns the larger address.
func addrMax(a, b netip.Addr) netip.Addr {
	if a.Less(b) {
		return b
	}
	return a
}

// addrMin returns the smaller address.
func addrMin(a, b netip.Addr) netip.Addr {
	if a.Less(b) {
		return a
	}
	return b
}
