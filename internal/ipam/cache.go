package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
)

// blockCache keeps this node's blocks of one pool (with their
// resourceVersions) on the node, so the common ADD and DEL need one API
// request: the update.
//
// Invariant: when the file exists it reflects every write this node made to
// its own blocks. Every write path removes the file before writing to the
// store and stores the result after success, all under the node lock, so a
// crash or an ambiguous write leaves no cache and the next call lists.
// Other writers (borrowing nodes, GC) make the cached resourceVersions stale;
// the update then conflicts and the caller drops the cache and lists.
// A cached "owner already holds X" is re-read from the store before use.
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
	return &blockCache{path: filepath.Join(dir, pool.Key()+".blocks.json"), node: node}
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
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return
	}
	tmp := c.path + ".tmp"
	if os.WriteFile(tmp, data, 0o600) != nil {
		return
	}
	_ = os.Rename(tmp, c.path)
}
