package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit of one process's concurrent allocations.
//
// A pod burst on a node sends many ADDs for the same network at once. The
// node lock serialises them, and each writes this node's block: one API
// request per address, one after the other, so the last of 16 pods waits
// for 15 round trips. In the daemon (rdmanet-ipam in-process) the calls
// that queue for one node, pool and range while a write is in flight are
// taken together: one lock, one read of the node's blocks, every new owner
// assigned in memory, one Update per changed block (usually one). Anything
// that is not this common case — an owner that already holds an address or
// is in the borrow journal, no room left in this node's blocks, a batch
// write that fails permanently — goes through the single-owner path,
// unchanged, so results and errors are exactly those of Allocate one by
// one. A rdmanet-ipam process that serves one call sees batches of one.

// batchKey names the allocations that may share a write: same state
// directory (node cache, lock), node, pool and range.
type batchKey struct {
	stateDir, node, pool string
	// rng is every field of the Range that decides which address it
	// hands out (two configs may share a pool with other bounds).
	rng string
}

func rangeKey(r *Range) string {
	return fmt.Sprintf("%s|%s|%s|%v|%s|%d|%t", r.Prefix, r.First, r.Last, r.Exclude, r.Gateway, r.BlockBits, r.Isolated)
}

// batchers holds one batcher per key while it has work; an idle batcher is
// removed by its last leader.
var batchers = struct {
	sync.Mutex
	m map[batchKey]*batcher
}{m: map[batchKey]*batcher{}}

type batcher struct {
	key   batchKey
	queue []*allocReq // guarded by batchers' mutex
}

// allocReq is one Allocate call waiting in a batcher.
type allocReq struct {
	ctx   context.Context
	owner Owner
	// state: reqWaiting until a leader takes it (reqTaken) or its caller
	// gives up first (reqAbandoned).
	state atomic.Int32
	addr  netip.Addr
	err   error
	done  chan struct{}
}

const (
	reqWaiting int32 = iota
	reqTaken
	reqAbandoned
)

// allocateBatched queues the call; the call that finds no batcher for its
// key starts one leader goroutine, which serves the queue until it is empty.
func (a *Allocator) allocateBatched(ctx context.Context, pool Pool, r *Range, owner Owner) (netip.Addr, error) {
	key := batchKey{stateDir: a.StateDir, node: a.Node, pool: pool.Key(), rng: rangeKey(r)}
	req := &allocReq{ctx: ctx, owner: owner, done: make(chan struct{})}
	batchers.Lock()
	b, running := batchers.m[key]
	if !running {
		b = &batcher{key: key}
		batchers.m[key] = b
	}
	b.queue = append(b.queue, req)
	batchers.Unlock()
	if !running {
		go a.lead(b, pool, r)
	}
	select {
	case <-req.done:
		return req.addr, req.err
	case <-ctx.Done():
		// Not taken yet: never written. Taken: the leader holds the node
		// lock and the write may land; the owner's DEL waits for that lock
		// and frees it, as after any ADD whose caller stopped waiting.
		req.state.CompareAndSwap(reqWaiting, reqAbandoned)
		return netip.Addr{}, fmt.Errorf("rdmanet-ipam: waiting for this node's allocations of %s: %w", r.Spec, ctx.Err())
	}
}

// lead serves b's queue batch by batch and removes b when it is empty.
func (a *Allocator) lead(b *batcher, pool Pool, r *Range) {
	for {
		batchers.Lock()
		waiting := slices.Clone(b.queue)
		if len(waiting) == 0 {
			delete(batchers.m, b.key)
			batchers.Unlock()
			return
		}
		batchers.Unlock()
		a.serveBatch(b, pool, r, waiting)
	}
}

// serveBatch takes the node lock, then every request still waiting (those
// queued while it waited for the lock too), allocates for them and answers
// each. A request is taken only under the lock: a caller that gives up
// before is never written, and one that gives up after has its DEL wait
// for the lock, so the DEL always sees the write it undoes.
func (a *Allocator) serveBatch(b *batcher, pool Pool, r *Range, waiting []*allocReq) {
	lockCtx, cancelLock := batchContext(waiting)
	defer cancelLock()
	unlock, err := a.lock(lockCtx, pool)
	if err != nil {
		// Every one of waiting has given up by now (lockCtx ends at the
		// last of their deadlines); later arrivals stay queued.
		batchers.Lock()
		b.queue = slices.DeleteFunc(b.queue, func(q *allocReq) bool { return slices.Contains(waiting, q) })
		batchers.Unlock()
		for _, q := range waiting {
			if q.state.CompareAndSwap(reqWaiting, reqTaken) {
				q.err = err
				close(q.done)
			}
		}
		return
	}
	defer unlock()
	batchers.Lock()
	queue := b.queue
	b.queue = nil
	batchers.Unlock()
	var reqs []*allocReq
	for _, q := range queue {
		if q.state.CompareAndSwap(reqWaiting, reqTaken) {
			reqs = append(reqs, q)
		}
	}
	defer func() {
		for _, q := range reqs {
			close(q.done)
		}
	}()
	if len(reqs) == 0 {
		return
	}
	ctx, cancel := batchContext(reqs)
	defer cancel()
	if err := a.reserveGateway(ctx, pool, r); err != nil {
		for _, q := range reqs {
			q.err = err
		}
		return
	}
	if len(reqs) > 1 {
		// The batch write is an optimisation: whatever it did not place
		// (or placed before failing) is settled below, one by one.
		_ = a.retry(ctx, func() error { return a.tryAllocateBatch(ctx, pool, r, reqs) })
	}
	for _, q := range reqs {
		if q.addr.IsValid() {
			continue
		}
		q.err = a.retry(ctx, func() error {
			var err error
			q.addr, err = a.tryAllocate(ctx, pool, r, q.owner)
			return err
		})
	}
}

// batchContext is the batch's context: not canceled by any one caller
// giving up, and ending at the latest of their deadlines.
func batchContext(reqs []*allocReq) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, q := range reqs {
		d, ok := q.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.WithoutCancel(reqs[0].ctx))
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(reqs[0].ctx), latest)
}

// tryAllocateBatch is one optimistic attempt at the common case for every
// request without an address yet: new owners placed in this node's blocks
// (from the node cache, or one List) and one Update per changed block. It
// sets addr only on requests whose block the store accepted; the others are
// left to tryAllocate.
func (a *Allocator) tryAllocateBatch(ctx context.Context, pool Pool, r *Range, reqs []*allocReq) error {
	cache := newBlockCache(a.StateDir, pool, a.Node)
	mine, cached := cache.load()
	if !cached {
		var err error
		if mine, err = a.Store.List(ctx, pool, a.Node); err != nil {
			return err
		}
	}
	j := newJournal(a.StateDir, pool)
	created := a.now()
	sortBlocks(mine)
	placed := map[int][]int{} // block index -> requests assigned to it
	tentative := make([]netip.Addr, len(reqs))
	for i, q := range reqs {
		if q.addr.IsValid() {
			continue
		}
		if _, _, held := findOwner(mine, q.owner); held || j.get(q.owner) != "" {
			continue // a repeated ADD: the single-owner path checks the store
		}
		for k := range mine {
			if addr, ok := assign(&mine[k], r, q.owner, a.Node, created); ok {
				tentative[i] = addr
				placed[k] = append(placed[k], i)
				break
			}
		}
	}
	if len(placed) == 0 {
		return nil
	}
	if err := cache.drop(); err != nil {
		return err
	}
	blocks := make([]int, 0, len(placed))
	for k := range placed {
		blocks = append(blocks, k)
	}
	slices.Sort(blocks)
	for _, k := range blocks {
		upd, err := a.Store.Update(ctx, &mine[k])
		if err != nil {
			// Blocks written before this one hold their owners; the
			// retry lists again (no cache) and finds them.
			return err
		}
		mine[k] = *upd
		for _, i := range placed[k] {
			reqs[i].addr = tentative[i]
		}
	}
	cache.store(mine)
	return nil
}
