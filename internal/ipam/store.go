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

// Pool identifies the addresses shared by every config with the same network
// name and range CIDR.
type Pool struct {
	Network string
	Prefix  netip.Prefix
}

// Key is a short stable hash of the pool, used in block names and labels.
func (p Pool) Key() string {
	h := sha256.Sum256([]byte(p.Network + "\x00" + p.Prefix.String()))
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

// BlockMatches reports whether b belongs to pool (and node, when set). Stores
// filter by labels; this re-checks the spec so a hash collision cannot mix pools.
func BlockMatches(b *v1alpha1.IPAMBlock, pool Pool, node string) bool {
	if pool.Prefix.IsValid() && (b.Spec.Network != pool.Network || b.Spec.Range != pool.Prefix.String()) {
		return false
	}
	return node == "" || b.Spec.Node == node
}
