package ipam

import (
	"os"
	"sync"
	"time"
)

// StoreCache keeps one kubernetes store per kubeconfig file for a
// long-running process (rdmanet-daemon serving the plugins in-process): its
// API client, connections and TLS sessions are reused across calls instead
// of built for every call, as an exec'd plugin must. A kubeconfig whose file
// changes (size or modification time) gets a new client; every other store
// (local, or a kubeconfig that cannot be read) is opened per call by
// OpenStore, errors included, exactly as in the exec'd plugin.
type StoreCache struct {
	// Open opens a store (nil: OpenStore).
	Open func(*Config) (Store, error)

	mu sync.Mutex
	m  map[string]cachedStore
}

type cachedStore struct {
	size  int64
	mtime time.Time
	store Store
}

// Get returns the store cfg selects, reusing a kubernetes store opened
// earlier from the same unchanged kubeconfig file.
func (c *StoreCache) Get(cfg *Config) (Store, error) {
	open := c.Open
	if open == nil {
		open = OpenStore
	}
	if cfg.Store.Type != StoreKubernetes || cfg.Store.Kubeconfig == "" {
		return open(cfg)
	}
	st, err := os.Stat(cfg.Store.Kubeconfig)
	if err != nil {
		return open(cfg) // reports the unusable kubeconfig as the plugin does
	}
	key := cfg.Store.Kubeconfig
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok && e.size == st.Size() && e.mtime.Equal(st.ModTime()) {
		return e.store, nil
	}
	s, err := open(cfg)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[string]cachedStore{}
	}
	c.m[key] = cachedStore{size: st.Size(), mtime: st.ModTime(), store: s}
	return s, nil
}
