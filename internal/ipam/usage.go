package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Usage is one pool's address usage on this node, as of the node's block
// cache (what the last allocation or release through the node's local
// state wrote; see blockCache): cheap to read, no API request.
type Usage struct {
	// Network is the IPAM network name, Range the pool's CIDR.
	Network, Range string
	// Blocks is how many blocks of the range this node holds, Addresses
	// how many addresses they span.
	Blocks    int
	Addresses float64
	// Allocated counts addresses held by pods (this node's or borrowers'),
	// Reserved those no pod may hold (gateways).
	Allocated, Reserved int
}

// ReadUsage reads the block caches in dir (an IPAM store path, e.g.
// DefaultLocalStorePath) and sums them per (network, range), sorted. A
// missing dir is no pools; a cache that does not parse is skipped and named
// in the error, the others are still returned.
func ReadUsage(dir string) ([]Usage, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("IPAM state dir: %w", err)
	}
	byKey := map[string]*Usage{}
	seen := map[string]bool{} // a block in the caches of two overlapping ranges counts once
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".blocks.json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // dropped for a write meanwhile
		}
		var f cacheFile
		if err == nil {
			err = json.Unmarshal(data, &f)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("block cache %s: %w", filepath.Join(dir, e.Name()), err))
			continue
		}
		for _, b := range f.Blocks {
			if b.Name != "" && seen[b.Name] {
				continue
			}
			seen[b.Name] = true
			key := b.Spec.Network + "\x00" + b.Spec.Range
			u := byKey[key]
			if u == nil {
				u = &Usage{Network: b.Spec.Network, Range: b.Spec.Range}
				byKey[key] = u
			}
			u.Blocks++
			if p, err := netip.ParsePrefix(b.Spec.CIDR); err == nil {
				u.Addresses += math.Exp2(float64(p.Addr().BitLen() - p.Bits()))
			}
			for _, a := range b.Spec.Allocations {
				if a.Reserved != "" {
					u.Reserved++
				} else {
					u.Allocated++
				}
			}
		}
	}
	out := make([]Usage, 0, len(byKey))
	for _, u := range byKey {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Network != out[j].Network {
			return out[i].Network < out[j].Network
		}
		return out[i].Range < out[j].Range
	})
	return out, errors.Join(errs...)
}
