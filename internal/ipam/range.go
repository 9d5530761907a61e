package ipam

import (
	"math/big"
	"net/netip"
	"slices"
)

// Range is one validated address range of a network: the pool it draws from
// (Prefix, shared by every config with the same network name and CIDR) and
// the addresses this config may hand out from it.
type Range struct {
	// Spec is the range as written in the config, for messages.
	Spec string
	// Prefix is the range's CIDR, masked (10.60.0.0/16). It identifies the pool.
	Prefix netip.Prefix
	// First and Last bound the usable addresses: the CIDR without its network
	// (and IPv4 broadcast) address, narrowed by range_start and range_end.
	First, Last netip.Addr
	// Exclude holds the excluded prefixes, masked, sorted, with nested ones removed.
	Exclude []netip.Prefix
	// Gateway, when valid, is returned in the result and never allocated.
	Gateway netip.Addr
	// BlockBits is the prefix length of the blocks nodes claim (node_slice_size).
	BlockBits int
	// Isolated is enable_overlapping_ranges=false: the range's pool is its
	// (network, CIDR) alone, blind to overlapping ranges of the network.
	Isolated bool
}

// Pool is the pool r draws from in network.
func (r *Range) Pool(network string) Pool {
	return Pool{Network: network, Prefix: r.Prefix, Isolated: r.Isolated}
}

// Usable reports whether a may be allocated from r.
func (r *Range) Usable(a netip.Addr) bool {
	n, ok := r.NextUsable(a)
	return ok && n == a
}

// NextUsable returns the smallest usable address >= a.
func (r *Range) NextUsable(a netip.Addr) (netip.Addr, bool) {
	if a.BitLen() != r.First.BitLen() {
		return netip.Addr{}, false
	}
	if a.Less(r.First) {
		a = r.First
	}
	for {
		if r.Last.Less(a) {
			return netip.Addr{}, false
		}
		moved := false
		if r.Gateway.IsValid() && a == r.Gateway {
			a = a.Next()
			moved = true
		} else {
			for _, e := range r.Exclude {
				if e.Contains(a) {
					a = lastAddr(e).Next()
					moved = true
					break
				}
			}
		}
		if !moved {
			return a, true
		}
		if !a.IsValid() { // wrapped past the top of the address space
			return netip.Addr{}, false
		}
	}
}

// Size is the number of usable addresses.
func (r *Range) Size() *big.Int {
	n := countBetween(r.First, r.Last)
	for _, e := range r.Exclude {
		lo, hi := addrMax(e.Addr(), r.First), addrMin(lastAddr(e), r.Last)
		n.Sub(n, countBetween(lo, hi))
	}
	if r.Gateway.IsValid() && !r.excluded(r.Gateway) && !r.Gateway.Less(r.First) && !r.Last.Less(r.Gateway) {
		n.Sub(n, big.NewInt(1))
	}
	return n
}

func (r *Range) excluded(a netip.Addr) bool {
	for _, e := range r.Exclude {
		if e.Contains(a) {
			return true
		}
	}
	return false
}

// blockOf is the block (of r.BlockBits) that contains a.
func (r *Range) blockOf(a netip.Addr) netip.Prefix {
	return netip.PrefixFrom(a, r.BlockBits).Masked()
}

// blockUsable reports whether block b holds at least one usable address.
func (r *Range) blockUsable(b netip.Prefix) bool {
	n, ok := r.NextUsable(b.Addr())
	return ok && b.Contains(n)
}

// nextFreeBlock returns the first block, at or after the block containing
// start and wrapping around once, that holds a usable address and overlaps
// none of the taken prefixes. start spreads nodes over the range so they do
// not all race for the same block.
func (r *Range) nextFreeBlock(taken []netip.Prefix, start netip.Addr) (netip.Prefix, bool) {
	slices.SortFunc(taken, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	if !start.IsValid() || start.Less(r.First) || r.Last.Less(start) {
		start = r.First
	}
	if b, ok := r.scanBlocks(taken, start, r.Last); ok {
		return b, true
	}
	if start == r.First {
		return netip.Prefix{}, false
	}
	return r.scanBlocks(taken, r.First, start)
}

// scanBlocks looks for a free usable block whose first usable address lies in [from, to].
func (r *Range) scanBlocks(taken []netip.Prefix, from, to netip.Addr) (netip.Prefix, bool) {
	a := from
	for {
		u, ok := r.NextUsable(a)
		if !ok || to.Less(u) {
			return netip.Prefix{}, false
		}
		b := r.blockOf(u)
		overlap := netip.Prefix{}
		for _, t := range taken {
			if t.Overlaps(b) {
				overlap = t
				break
			}
		}
		if !overlap.IsValid() {
			return b, true
		}
		// Skip past whichever is larger: the candidate block or the taken one.
		end := lastAddr(b)
		if e := lastAddr(overlap); end.Less(e) {
			end = e
		}
		a = end.Next()
		if !a.IsValid() {
			return netip.Prefix{}, false
		}
	}
}

// spreadStart maps a hash to an address inside [First, Last], used as the
// starting point of a node's block search.
func (r *Range) spreadStart(hash uint64) netip.Addr {
	n := countBetween(r.First, r.Last)
	off := new(big.Int).Mod(new(big.Int).SetUint64(hash), n)
	v := new(big.Int).Add(addrBig(r.First), off)
	buf := make([]byte, r.First.BitLen()/8)
	v.FillBytes(buf)
	a, _ := netip.AddrFromSlice(buf)
	return a
}
