package ipam

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
)

// Owner is the holder of an allocation. (ContainerID, IfName) is the
// idempotency key; the pod fields feed garbage collection.
type Owner struct {
	ContainerID  string
	IfName       string
	PodNamespace string
	PodName      string
	PodUID       string
}

func (o Owner) holds(a v1alpha1.Allocation) bool {
	return a.Reserved == "" && a.ContainerID == o.ContainerID && a.IfName == o.IfName
}

func (o Owner) allocation(node, created string) v1alpha1.Allocation {
	return v1alpha1.Allocation{
		ContainerID: o.ContainerID, IfName: o.IfName,
		PodNamespace: o.PodNamespace, PodName: o.PodName, PodUID: o.PodUID,
		Node: node, Created: created,
	}
}

// ReservedGateway is the Reserved reason of a gateway's reservation.
const ReservedGateway = "gateway"

// Locker serialises the allocations of one node for one pool, so processes of
// the same node never conflict with each other on the store (kubernetes store),
// or so read-modify-write of the node file is atomic (local store).
type Locker interface {
	Lock(ctx context.Context, key string) (unlock func(), err error)
}

// Allocator hands out addresses of ranges from blocks kept in a Store. It is
// safe to use from several goroutines and processes; each node uses its own
// node name.
type Allocator struct {
	Store Store
	// Node is this node's name; blocks it claims carry it.
	Node string
	// Lock, when set, serialises this node's calls per pool.
	Lock Locker
	// MaxAttempts bounds retries after conflicts and transient errors
	// (0 means 1000); ctx bounds them in time.
	MaxAttempts int
	// StateDir, when set, holds the node's block cache, borrow journal and
	// gateway markers.
	StateDir string
	// Now is the clock of allocation times (nil: time.Now).
	Now func() time.Time
}

func (a *Allocator) now() string {
	t := time.Now()
	if a.Now != nil {
		t = a.Now()
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// GatewayTakenError: the gateway a config declares is already held by a pod
// (allocated by another config of the network before this one reserved it).
type GatewayTakenError struct {
	Network, Range, Gateway, Block string
	Holder                         v1alpha1.Allocation
}

func (e *GatewayTakenError) Error() string {
	return fmt.Sprintf("rdmanet-ipam: network %q: gateway %s of range %q is allocated to pod %s/%s (container %s, interface %s, block %s) by another config of this network; "+
		"fix: exclude %s in the other config and free the address (delete that pod, or let `rdmanet-ipam gc` release it once the pod is gone), or choose a gateway no pod holds",
		e.Network, e.Gateway, e.Range, e.Holder.PodNamespace, e.Holder.PodName, e.Holder.ContainerID, e.Holder.IfName, e.Block, e.Gateway)
}

// ExhaustedError reports a full range with the network, range and the fix.
type ExhaustedError struct {
	Network string
	Range   string
	Size    string
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("rdmanet-ipam: network %q: range %q is exhausted: all %s usable addresses are allocated; fix: widen the range, shrink exclude, or run `rdmanet-ipam gc` to release addresses of deleted pods",
		e.Network, e.Range, e.Size)
}

// Is makes errors.Is(err, ErrExhausted) true.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// Allocate returns owner's address in r, allocating one when owner has none.
// Repeating the call returns the same address.
//
// When r has a gateway, it is first reserved in the store (once per node and
// pool, remembered in StateDir), so no range of the network hands it out.
//
// With a StateDir, concurrent calls of this process for the same node,
// pool and range share the node lock and the block write (batch.go).
func (a *Allocator) Allocate(ctx context.Context, network string, r *Range, owner Owner) (netip.Addr, error) {
	pool := r.Pool(network)
	if a.StateDir != "" {
		return a.allocateBatched(ctx, pool, r, owner)
	}
	unlock, err := a.lock(ctx, pool)
	if err != nil {
		return netip.Addr{}, err
	}
	defer unlock()
	if err := a.reserveGateway(ctx, pool, r); err != nil {
		return netip.Addr{}, err
	}
	var addr netip.Addr
	err = a.retry(ctx, func() error {
		var err error
		addr, err = a.tryAllocate(ctx, pool, r, owner)
		return err
	})
	return addr, err
}

// Release frees owner's addresses in pool. Releasing an unknown owner succeeds.
func (a *Allocator) Release(ctx context.Context, pool Pool, owner Owner) error {
	unlock, err := a.lock(ctx, pool)
	if err != nil {
		return err
	}
	defer unlock()
	return a.retry(ctx, func() error { return a.tryRelease(ctx, pool, owner) })
}

// Lookup returns owner's address in pool, or ErrNotFound.
func (a *Allocator) Lookup(ctx context.Context, pool Pool, owner Owner) (netip.Addr, error) {
	var addr netip.Addr
	err := a.retry(ctx, func() error {
		for _, node := range []string{a.Node, ""} {
			blocks, err := a.Store.List(ctx, pool, node)
			if err != nil {
				return err
			}
			if _, ad, ok := findOwner(blocks, owner); ok {
				addr = ad
				return nil
			}
		}
		return ErrNotFound
	})
	return addr, err
}

func (a *Allocator) lock(ctx context.Context, pool Pool) (func(), error) {
	if a.Lock == nil {
		return func() {}, nil
	}
	return a.Lock.Lock(ctx, pool.Key())
}

// retry runs fn until it succeeds, fails permanently, or ctx ends. Conflicts
// retry at once with a little jitter; transient errors back off up to 1 s.
func (a *Allocator) retry(ctx context.Context, fn func() error) error {
	maxAttempts := a.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 1000
	}
	var err error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err = fn(); err == nil {
			return nil
		}
		var wait time.Duration
		switch {
		case errors.Is(err, ErrConflict):
			wait = time.Duration(rand.Int64N(int64(time.Millisecond) * int64(min(attempt+1, 20))))
		case errors.Is(err, ErrTransient):
			wait = min(time.Second, 50*time.Millisecond<<min(attempt, 5))
			wait = wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1))
		default:
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
	return fmt.Errorf("rdmanet-ipam: gave up after %d attempts: %w", maxAttempts, err)
}

// tryAllocate is one optimistic attempt. Common path: this node's blocks
// from the node cache (or one List), then one Update — the only write.
func (a *Allocator) tryAllocate(ctx context.Context, pool Pool, r *Range, owner Owner) (netip.Addr, error) {
	cache := newBlockCache(a.StateDir, pool, a.Node)
	mine, cached := cache.load()
	if !cached {
		var err error
		if mine, err = a.Store.List(ctx, pool, a.Node); err != nil {
			return netip.Addr{}, err
		}
	}
	if b, addr, ok := findOwner(mine, owner); ok {
		if !cached {
			cache.store(mine)
			return addr, nil
		}
		// Repeated ADD answered from the cache: confirm with the store.
		cur, err := a.Store.Get(ctx, b.Name)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return netip.Addr{}, err
		}
		if cur != nil {
			if _, addr, ok := findOwner([]v1alpha1.IPAMBlock{*cur}, owner); ok {
				return addr, nil
			}
		}
		if err := cache.drop(); err != nil {
			return netip.Addr{}, err
		}
		return netip.Addr{}, fmt.Errorf("rdmanet-ipam: node cache of block %s is out of date: %w", b.Name, ErrConflict)
	}
	j := newJournal(a.StateDir, pool)
	if name := j.get(owner); name != "" {
		b, err := a.Store.Get(ctx, name)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return netip.Addr{}, err
		}
		if b != nil {
			if _, addr, ok := findOwner([]v1alpha1.IPAMBlock{*b}, owner); ok {
				return addr, nil
			}
		}
	}
	created := a.now()
	sortBlocks(mine)
	for i := range mine {
		if addr, ok := assign(&mine[i], r, owner, a.Node, created); ok {
			if err := cache.drop(); err != nil {
				return netip.Addr{}, err
			}
			upd, err := a.Store.Update(ctx, &mine[i])
			if err != nil {
				return netip.Addr{}, err
			}
			mine[i] = *upd
			cache.store(mine)
			return addr, nil
		}
	}

	// No room in our blocks: claim a new block, with the allocation in it.
	all, err := a.Store.List(ctx, pool, "")
	if err != nil {
		return netip.Addr{}, err
	}
	if _, addr, ok := findOwner(all, owner); ok {
		return addr, nil // borrowed earlier (e.g. a retried ADD whose reply was lost)
	}
	taken := make([]netip.Prefix, 0, len(all))
	var fresh []v1alpha1.IPAMBlock // this node's blocks, as just listed
	for i := range all {
		if p, err := netip.ParsePrefix(all[i].Spec.CIDR); err == nil {
			taken = append(taken, p)
		}
		if all[i].Spec.Node == a.Node {
			fresh = append(fresh, *all[i].DeepCopy())
		}
	}
	if cidr, ok := r.nextFreeBlock(taken, r.spreadStart(hash64(a.Node))); ok {
		b := NewBlock(pool, cidr, a.Node)
		addr, ok := assign(b, r, owner, a.Node, created)
		if !ok {
			return netip.Addr{}, fmt.Errorf("rdmanet-ipam: internal error: new block %s of range %s has no usable address", cidr, r.Spec)
		}
		if err := cache.drop(); err != nil {
			return netip.Addr{}, err
		}
		created, err := a.Store.Create(ctx, b)
		if err != nil {
			return netip.Addr{}, err
		}
		cache.store(append(fresh, *created))
		return addr, nil
	}

	// Every block is claimed: borrow from other nodes' blocks, starting at a
	// random one so borrowers spread out.
	if n := len(all); n > 0 {
		off := rand.IntN(n)
		for k := range n {
			b := &all[(off+k)%n]
			if addr, ok := assign(b, r, owner, a.Node, created); ok {
				if err := j.set(owner, b.Name); err != nil {
					return netip.Addr{}, err
				}
				if b.Spec.Node == a.Node {
					if err := cache.drop(); err != nil {
						return netip.Addr{}, err
					}
				}
				_, err := a.Store.Update(ctx, b)
				return addr, err
			}
		}
	}
	return netip.Addr{}, &ExhaustedError{Network: pool.Network, Range: r.Spec, Size: r.Size().String()}
}

func removeOwner(b *v1alpha1.IPAMBlock, owner Owner) bool {
	changed := false
	for k, al := range b.Spec.Allocations {
		if owner.holds(al) {
			delete(b.Spec.Allocations, k)
			changed = true
		}
	}
	return changed
}

// tryRelease is one optimistic attempt. Common path: this node's blocks from
// the node cache (or one List), then one Update.
func (a *Allocator) tryRelease(ctx context.Context, pool Pool, owner Owner) error {
	cache := newBlockCache(a.StateDir, pool, a.Node)
	mine, cached := cache.load()
	if !cached {
		var err error
		if mine, err = a.Store.List(ctx, pool, a.Node); err != nil {
			return err
		}
	}
	found := false
	for i := range mine {
		if removeOwner(&mine[i], owner) {
			found = true
			if err := cache.drop(); err != nil {
				return err
			}
			upd, err := a.Store.Update(ctx, &mine[i])
			if err != nil {
				return err
			}
			mine[i] = *upd
		}
	}
	if found {
		cache.store(mine)
		return newJournal(a.StateDir, pool).set(owner, "")
	}
	// Not in this node's blocks: borrowed, or unknown.
	all, err := a.Store.List(ctx, pool, "")
	if err != nil {
		return err
	}
	for i := range all {
		if removeOwner(&all[i], owner) {
			if all[i].Spec.Node == a.Node {
				if err := cache.drop(); err != nil {
					return err
				}
			}
			if _, err := a.Store.Update(ctx, &all[i]); err != nil {
				return err
			}
		}
	}
	return newJournal(a.StateDir, pool).set(owner, "")
}

// assign puts owner on the lowest free usable address of b (a reserved
// address is not free).
func assign(b *v1alpha1.IPAMBlock, r *Range, owner Owner, node, created string) (netip.Addr, bool) {
	cidr, err := netip.ParsePrefix(b.Spec.CIDR)
	if err != nil || !r.Prefix.Overlaps(cidr) {
		return netip.Addr{}, false
	}
	if b.Spec.Allocations == nil {
		b.Spec.Allocations = map[string]v1alpha1.Allocation{}
	}
	for a, ok := r.NextUsable(cidr.Addr()); ok && cidr.Contains(a); a, ok = r.NextUsable(a.Next()) {
		if _, used := b.Spec.Allocations[a.String()]; !used {
			al := owner.allocation(node, created)
			if node == b.Spec.Node {
				al.Node = "" // implied by the block; set only on borrowed addresses
			}
			b.Spec.Allocations[a.String()] = al
			return a, true
		}
		if !a.Next().IsValid() {
			break
		}
	}
	return netip.Addr{}, false
}

func findOwner(blocks []v1alpha1.IPAMBlock, owner Owner) (*v1alpha1.IPAMBlock, netip.Addr, bool) {
	for i := range blocks {
		for k, al := range blocks[i].Spec.Allocations {
			if owner.holds(al) {
				if addr, err := netip.ParseAddr(k); err == nil {
					return &blocks[i], addr, true
				}
			}
		}
	}
	return nil, netip.Addr{}, false
}

func sortBlocks(bs []v1alpha1.IPAMBlock) {
	slices.SortFunc(bs, func(x, y v1alpha1.IPAMBlock) int {
		px, _ := netip.ParsePrefix(x.Spec.CIDR)
		py, _ := netip.ParsePrefix(y.Spec.CIDR)
		return px.Addr().Compare(py.Addr())
	})
}

func hash64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// reserveGateway makes sure r's gateway is held by a reservation in a block
// of pool, so that no range of the network, this config's or another one's,
// ever hands it to a pod. It costs a List (and at most one write) the first
// time a node allocates from the pool; a marker in StateDir skips it after.
func (a *Allocator) reserveGateway(ctx context.Context, pool Pool, r *Range) error {
	if !r.Gateway.IsValid() {
		return nil
	}
	m := newGatewayMarker(a.StateDir, pool)
	if m.has(r.Gateway) {
		return nil
	}
	if err := a.retry(ctx, func() error { return a.tryReserveGateway(ctx, pool, r) }); err != nil {
		return err
	}
	m.set(r.Gateway)
	return nil
}

func (a *Allocator) tryReserveGateway(ctx context.Context, pool Pool, r *Range) error {
	gw := r.Gateway
	all, err := a.Store.List(ctx, pool, "")
	if err != nil {
		return err
	}
	cache := newBlockCache(a.StateDir, pool, a.Node)
	reservation := v1alpha1.Allocation{Reserved: ReservedGateway, Created: a.now()}
	taken := make([]netip.Prefix, 0, len(all))
	for i := range all {
		b := &all[i]
		cidr, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil {
			continue
		}
		taken = append(taken, cidr)
		if !cidr.Contains(gw) {
			continue
		}
		if al, held := b.Spec.Allocations[gw.String()]; held {
			if al.Reserved != "" {
				return nil // reserved already (by this config or another)
			}
			return &GatewayTakenError{Network: pool.Network, Range: r.Spec, Gateway: gw.String(), Block: b.Name, Holder: al}
		}
		if b.Spec.Allocations == nil {
			b.Spec.Allocations = map[string]v1alpha1.Allocation{}
		}
		b.Spec.Allocations[gw.String()] = reservation
		if b.Spec.Node == a.Node {
			if err := cache.drop(); err != nil {
				return err
			}
		}
		_, err = a.Store.Update(ctx, b)
		return err
	}
	// No block holds the gateway yet: claim the block that would hold it,
	// with the reservation in it (a smaller one if blocks of another size
	// overlap it).
	for bits := r.BlockBits; bits <= gw.BitLen(); bits++ {
		cidr := netip.PrefixFrom(gw, bits).Masked()
		if slices.ContainsFunc(taken, cidr.Overlaps) {
			continue
		}
		b := NewBlock(pool, cidr, a.Node)
		b.Spec.Allocations[gw.String()] = reservation
		if err := cache.drop(); err != nil {
			return err
		}
		_, err := a.Store.Create(ctx, b)
		return err
	}
	return fmt.Errorf("rdmanet-ipam: internal error: network %q: gateway %s lies in no block, yet a block overlaps %s/%d", pool.Network, gw, gw, gw.BitLen())
}
