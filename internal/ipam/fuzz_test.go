package ipam

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: any network config either fails with a ConfigError or yields
// ranges whose invariants hold. Seeds: the golden configs.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/golden/*.conf")
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"ipam":{"range":"10.0.0.0/8","exclude":["10.0.0.0/9"],"range_end":"10.200.0.1","gateway":"10.200.0.1"}}`))
	f.Add([]byte(`{"ipam":{"range":"::/0","node_slice_size":"/116"}}`))
	f.Add([]byte(`{"ipam":{"range":"::ffff:10.0.0.0/120"}}`))
	f.Add([]byte(`{"ipam":{"range":"10.0.0.16/28","enable_overlapping_ranges":false}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, Env{})
		if err != nil {
			if _, ok := err.(*ConfigError); !ok {
				t.Fatalf("error is not a *ConfigError: %T %v", err, err)
			}
			return
		}
		for _, r := range cfg.Ranges {
			checkRangeInvariants(t, r)
		}
	})
}

func checkRangeInvariants(t *testing.T, r *Range) {
	t.Helper()
	if r.Last.Less(r.First) || !r.Prefix.Contains(r.First) || !r.Prefix.Contains(r.Last) {
		t.Fatalf("bounds %s-%s outside %s", r.First, r.Last, r.Prefix)
	}
	if r.Size().Sign() <= 0 {
		t.Fatalf("valid range %s has no usable address", r.Spec)
	}
	a, ok := r.NextUsable(r.Prefix.Addr())
	if !ok || !r.Prefix.Contains(a) || r.Gateway == a || r.excluded(a) {
		t.Fatalf("first usable %s (%v) of %s is not usable", a, ok, r.Spec)
	}
	// Blocks hold 1..4096 addresses; an isolated pool's lie inside the
	// range, a shared pool's have the slice size even when the range is smaller.
	if r.BlockBits > a.BitLen() || a.BitLen()-r.BlockBits > maxBlockHostBits || (r.Isolated && r.BlockBits < r.Prefix.Bits()) {
		t.Fatalf("block bits %d for %s (isolated %t)", r.BlockBits, r.Prefix, r.Isolated)
	}
	if b, ok := r.nextFreeBlock(nil, r.spreadStart(12345)); !ok || !r.blockUsable(b) || !r.Prefix.Overlaps(b) {
		t.Fatalf("no usable free block in a range with %s addresses (got %s %v)", r.Size(), b, ok)
	}
}

// FuzzRange compares Size and NextUsable with a brute-force enumeration on
// small IPv4 ranges.
func FuzzRange(f *testing.F) {
	f.Add("10.0.0.0/24", "", "", "10.0.0.0/28", "10.0.0.77", "10.0.0.1")
	f.Add("192.168.2.225/28", "", "", "192.168.2.229/30", "192.168.2.236/32", "")
	f.Add("10.0.0.50-10.0.0.80/24", "", "", "10.0.0.64/27", "", "10.0.0.60")
	f.Add("10.0.0.0/22", "10.0.1.7", "10.0.2.9", "10.0.1.0/25", "10.0.2.0/30", "10.0.1.200")
	f.Add("10.0.0.0/31", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, rng, start, end, ex1, ex2, gw string) {
		var excl []string
		for _, e := range []string{ex1, ex2} {
			if e != "" {
				excl = append(excl, e)
			}
		}
		raw := map[string]any{"range": rng, "range_start": start, "range_end": end, "exclude": excl, "gateway": gw}
		if gw == "" {
			delete(raw, "gateway")
		}
		conf, _ := json.Marshal(map[string]any{"name": "fz", "ipam": raw})
		cfg, err := Parse(conf, Env{})
		if err != nil {
			return
		}
		r := cfg.Ranges[0]
		checkRangeInvariants(t, r)
		if !r.Prefix.Addr().Is4() || r.Prefix.Bits() < 20 {
			return
		}
		usable := func(a netip.Addr) bool {
			if a.Less(r.First) || r.Last.Less(a) || a == r.Gateway {
				return false
			}
			for _, e := range r.Exclude {
				if e.Contains(a) {
					return false
				}
			}
			return true
		}
		n := int64(0)
		var prevNext netip.Addr
		for a := r.Prefix.Addr(); r.Prefix.Contains(a); a = a.Next() {
			if usable(a) {
				n++
			}
			if r.Usable(a) != usable(a) {
				t.Fatalf("Usable(%s) = %v, brute force says %v", a, r.Usable(a), usable(a))
			}
			nx, ok := r.NextUsable(a)
			if ok && (!usable(nx) || nx.Less(a)) {
				t.Fatalf("NextUsable(%s) = %s which is not usable or goes backwards", a, nx)
			}
			if ok && prevNext.IsValid() && nx.Less(prevNext) {
				t.Fatalf("NextUsable not monotonic at %s", a)
			}
			if ok {
				prevNext = nx
			}
			if !a.Next().IsValid() {
				break
			}
		}
		if r.Size().Int64() != n {
			t.Fatalf("Size = %s, brute force %d", r.Size(), n)
		}
	})
}
