package ipam

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
)

// Store errors. Implementations wrap them so callers test with errors.Is.
var (
	// ErrConflict: the block was created or changed by someone else; re-read and retry.
	ErrConflict = errors.New("conflict")
	// ErrNotFound: the block does not exist.
	ErrNotFound = errors.New("not found")
	// ErrTransient: the store is unreachable or overloaded; retry later.
	ErrTransient = errors.New("store temporarily unavailable")
	// ErrExhausted: every usable address of the range is allocated.
	ErrExhausted = errors.New("range exhausted")
)

// Pool is the set of blocks a range allocates from.
//
// By default (enable_overlapping_ranges, Whereabouts' default) a network's
// ranges share one address space: the pool of a range is every block of the
// network that overlaps the range's CIDR, whichever range created it, so two
// configs of one network_name whose ranges overlap never hand out the same
// address. Such blocks are named after the network alone, so two ranges
// claiming the same addresses race on the same name.
//
// An Isolated pool (enable_overlapping_ranges: false) is one (network, CIDR)
// alone: it sees only blocks created for exactly that CIDR, and other ranges
// may hand out its addresses.
type Pool struct {
	Network string
	Prefix  netip.Prefix
	// Isolated is enable_overlapping_ranges=false.
	Isolated bool
}

// Key is a short stable hash naming the blocks the pool creates (block names,
// the pool label) and the node lock: the network for a shared pool, the
// network and CIDR for an isolated one.
func (p Pool) Key() string {
	if !p.Isolated {
		return shortHash("network\x00" + p.Network)
	}
	return shortHash(p.Network + "\x00" + p.Prefix.String())
}

// stateKey names the pool's node-local files (block cache, borrow journal,
// gateway marker): one set per (network, CIDR, mode).
func (p Pool) stateKey() string {
	if !p.Isolated {
		return shortHash("shared\x00"+p.Network+"\x00"+p.Prefix.String()) + "-s"
	}
	return p.Key()
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:5])
}

// Store keeps IPAM blocks. Every mutating call is a compare-and-swap on the
// block's ResourceVersion, so concurrent writers never lose each other's updates.
type Store interface {
	// List returns the pool's blocks, only node's when node != "". A zero Pool
	// lists the blocks of every pool.
	List(ctx context.Context, pool Pool, node string) ([]v1alpha1.IPAMBlock, error)
	// Get returns one block by name (ErrNotFound when absent).
	Get(ctx context.Context, name string) (*v1alpha1.IPAMBlock, error)
	// Create stores a new block; ErrConflict when the name is taken.
	Create(ctx context.Context, b *v1alpha1.IPAMBlock) (*v1alpha1.IPAMBlock, error)
	// Update replaces a block if its ResourceVersion is current; ErrConflict otherwise.
	Update(ctx context.Context, b *v1alpha1.IPAMBlock) (*v1alpha1.IPAMBlock, error)
	// Delete removes a block if its ResourceVersion is current (ErrConflict
	// otherwise); deleting an absent block succeeds.
	Delete(ctx context.Context, b *v1alpha1.IPAMBlock) error
}

var invalidName = regexp.MustCompile(`[^a-z0-9-]+`)

// BlockName is the deterministic name of the block with the given CIDR in pool:
// two nodes claiming the same block race on the same name.
func BlockName(pool Pool, cidr netip.Prefix) string {
	net := strings.Trim(invalidName.ReplaceAllString(strings.ToLower(pool.Network), "-"), "-")
	if len(net) > 40 {
		net = strings.Trim(net[:40], "-")
	}
	var addr string
	if cidr.Addr().Is4() {
		addr = strings.ReplaceAll(cidr.Addr().String(), ".", "-")
	} else {
		b := cidr.Addr().As16()
		addr = hex.EncodeToString(b[:])
	}
	if net == "" {
		net = "net"
	}
	return fmt.Sprintf("%s-%s-%s-%d", net, pool.Key(), addr, cidr.Bits())
}

var labelValueRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

// LabelValue returns s when it is a valid label value, else a hash of it.
func LabelValue(s string) string {
	if len(s) <= 63 && labelValueRE.MatchString(s) {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return "h-" + hex.EncodeToString(h[:12])
}

// NewBlock returns an unsaved block of pool claimed by node.
func NewBlock(pool Pool, cidr netip.Prefix, node string) *v1alpha1.IPAMBlock {
	b := &v1alpha1.IPAMBlock{
		Spec: v1alpha1.IPAMBlockSpec{
			Network:     pool.Network,
			Range:       pool.Prefix.String(),
			CIDR:        cidr.String(),
			Node:        node,
			Allocations: map[string]v1alpha1.Allocation{},
		},
	}
	b.APIVersion = v1alpha1.SchemeGroupVersion.String()
	b.Kind = v1alpha1.IPAMBlockKind
	b.Name = BlockName(pool, cidr)
	b.Labels = map[string]string{
		v1alpha1.LabelPool:    pool.Key(),
		v1alpha1.LabelNode:    LabelValue(node),
		v1alpha1.LabelNetwork: LabelValue(pool.Network),
	}
	return b
}

// BlockMatches reports whether b belongs to pool (and node, when set): for an
// isolated pool, a block created for its exact (network, CIDR); otherwise any
// block of the network overlapping the pool's CIDR. Stores filter by labels
// first; this re-checks the spec so a hash collision cannot mix pools.
func BlockMatches(b *v1alpha1.IPAMBlock, pool Pool, node string) bool {
	if pool.Prefix.IsValid() {
		if b.Spec.Network != pool.Network {
			return false
		}
		if pool.Isolated {
			if b.Spec.Range != pool.Prefix.String() {
				return false
			}
		} else if cidr, err := netip.ParsePrefix(b.Spec.CIDR); err != nil || !cidr.Overlaps(pool.Prefix) {
			return false
		}
	}
	return node == "" || b.Spec.Node == node
}

// ListSelector is the label selector of the pool's (and node's) blocks.
func ListSelector(pool Pool, node string) map[string]string {
	sel := map[string]string{}
	if pool.Prefix.IsValid() {
		if pool.Isolated {
			sel[v1alpha1.LabelPool] = pool.Key()
		} else {
			// Every block of the network, also those of other ranges and
			// of older releases (named per range), which overlap this one.
			sel[v1alpha1.LabelNetwork] = LabelValue(pool.Network)
		}
	}
	if node != "" {
		sel[v1alpha1.LabelNode] = LabelValue(node)
	}
	return sel
}
