package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/fsutil"
)

// blockCache keeps this node's blocks of one pool (with their
// resourceVersions) on the node, so the common ADD and DEL need one API
// request: the update.
//
// Invariant: when the file exists it reflects every write this node made to
// its own blocks through this pool. Every write path removes the file before
// writing to the store and stores the result after success, all under the
// node lock, so a crash or an ambiguous write leaves no cache and the next
// call lists. Other writers (borrowing nodes, GC, this node's allocations
// through another range overlapping this one) make the cached
// resourceVersions stale; the update then conflicts and the caller drops the
// cache and lists.
// A cached "owner already holds X" is re-read from the store before use.
// The file is not fsynced (fsutil.ReplaceFile), nor is drop's removal: after
// a power loss an older cache may be back, which is the stale case above
// (its resourceVersions conflict; the node lists). A cache is never newer
// than the store: it is written only after the store accepted the write.
type blockCache struct {
	path string
	node string
}

type cacheFile struct {
	Node   string               `json:"node"`
	Blocks []v1alpha1.IPAMBlock `json:"blocks"`
}

func newBlockCache(dir string, pool Pool, node string) *blockCache {
	if dir == "" {
		return nil
	}
	return &blockCache{path: filepath.Join(dir, pool.stateKey()+".blocks.json"), node: node}
}

func (c *blockCache) load() ([]v1alpha1.IPAMBlock, bool) {
	if c == nil {
		return nil, false
	}
	data, err := os.ReadFile(c.path)
	if err != nil {
		return nil, false
	}
	var f cacheFile
	if json.Unmarshal(data, &f) != nil || f.Node != c.node {
		return nil, false
	}
	return f.Blocks, true
}

// drop removes the cache before a write.
func (c *blockCache) drop() error {
	if c == nil {
		return nil
	}
	if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rdmanet-ipam: drop block cache: %w", err)
	}
	return nil
}

// store saves blocks after a successful write (best effort: without a cache
// the next call lists).
func (c *blockCache) store(blocks []v1alpha1.IPAMBlock) {
	if c == nil {
		return
	}
	data, err := json.Marshal(cacheFile{Node: c.node, Blocks: blocks})
	if err != nil {
		return
	}
	// no fsync: a cache a power loss made stale is safe (see above), and
	// the two fsyncs cost each ADD and DEL more than the rest of its disk work
	_ = fsutil.ReplaceFile(c.path, data, 0o600)
}

// gatewayMarker remembers on the node that a pool's gateway is reserved in
// the store, so only the first allocation of a node pays for the check.
// Losing it costs one List; a stale one is harmless, since reservations are
// never removed (DEL removes only its owner's addresses, GC keeps them).
type gatewayMarker struct {
	path string
}

func newGatewayMarker(dir string, pool Pool) *gatewayMarker {
	if dir == "" {
		return nil
	}
	return &gatewayMarker{path: filepath.Join(dir, pool.stateKey()+".gateway")}
}

func (m *gatewayMarker) has(gw netip.Addr) bool {
	if m == nil {
		return false
	}
	b, err := os.ReadFile(m.path)
	return err == nil && string(b) == gw.String()
}

// set records gw (best effort: without the marker the next call checks again).
func (m *gatewayMarker) set(gw netip.Addr) {
	if m != nil {
		_ = fsutil.ReplaceFile(m.path, []byte(gw.String()), 0o600) // a lost marker costs one List
	}
}
