package guidpool

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"strings"
	"time"

	"github.com/rdmanet/rdmanet/internal/ipam"
)

// Defaults of the pool config.
const (
	// DefaultConfigPath is the node's GUID pool config; no file means no pool
	// (pods must name their GUID, or the VF keeps its own).
	DefaultConfigPath = "/etc/cni/net.d/rdmanet-ipam.d/guid-pool.json"
	// EnvConfig overrides DefaultConfigPath.
	EnvConfig = "RDMANET_GUID_POOL_CONFIG"
	// DefaultName names the pool when the config does not.
	DefaultName = "default"
	// DefaultBlockSize is the number of GUIDs a node claims at a time.
	DefaultBlockSize = 64
	// DefaultStorePath holds the node's locks and block cache.
	DefaultStorePath = "/var/lib/rdmanet/guid-pool"
	// DefaultHookTimeout bounds one run of the subnet-manager hook.
	DefaultHookTimeout = 30 * time.Second
	// NetworkPrefix starts the IPAM network name of a GUID pool.
	NetworkPrefix = "infiniband-guid/"
)

// ErrInvalidConfig is matched by every config error.
var ErrInvalidConfig = errors.New("invalid GUID pool config")

// RawRange is one range as written. ib-kubernetes' names
// (GUID_POOL_RANGE_START/END as rangeStart/rangeEnd) are accepted at the top level too.
type RawRange struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// RawConfig is the GUID pool config file.
type RawConfig struct {
	Name       string     `json:"name,omitempty"`
	Ranges     []RawRange `json:"ranges,omitempty"`
	RangeStart string     `json:"rangeStart,omitempty"`
	RangeEnd   string     `json:"rangeEnd,omitempty"`
	// BlockSize is how many GUIDs a node claims per block (a power of 2, 1-4096).
	BlockSize int            `json:"blockSize,omitempty"`
	Store     *ipam.RawStore `json:"store,omitempty"`
	NodeName  string         `json:"nodeName,omitempty"`
	// Hook is a command run on every allocation and release (see Hook).
	Hook        []string `json:"hook,omitempty"`
	HookTimeout string   `json:"hookTimeout,omitempty"`
}

// Range is one validated GUID range.
type Range struct {
	First, Last GUID
	r           *ipam.Range
}

// Config is the validated pool config.
type Config struct {
	Name        string
	Network     string // IPAM network name: NetworkPrefix + Name
	Ranges      []Range
	Store       ipam.StoreConfig
	NodeName    string
	Hook        []string
	HookTimeout time.Duration
	Warnings    []string
}

func cfgErr(path, field, value, rule, fix string) error {
	return fmt.Errorf("%w: %s: field %q = %q: %s; fix: %s", ErrInvalidConfig, path, field, value, rule, fix)
}

// Parse reads a pool config file's content (path is for messages). Pure.
func Parse(path string, b []byte) (*Config, error) {
	var raw RawConfig
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s is not a JSON object: %w; fix: write {\"ranges\":[{\"start\":\"02:00:00:00:00:00:00:00\",\"end\":\"02:00:00:00:00:00:ff:ff\"}]}", ErrInvalidConfig, path, err)
	}
	c := &Config{Name: raw.Name, NodeName: raw.NodeName, Hook: raw.Hook, HookTimeout: DefaultHookTimeout}
	if c.Name == "" {
		c.Name = DefaultName
	}
	c.Network = NetworkPrefix + c.Name
	var known map[string]json.RawMessage
	_ = json.Unmarshal(b, &known)
	for k := range known {
		switch strings.ToLower(k) {
		case "name", "ranges", "rangestart", "rangeend", "blocksize", "store", "nodename", "hook", "hooktimeout":
		default:
			c.Warnings = append(c.Warnings, fmt.Sprintf("GUID pool config %s: unknown key %q ignored", path, k))
		}
	}
	rs := raw.Ranges
	if raw.RangeStart != "" || raw.RangeEnd != "" {
		rs = append(rs, RawRange{Start: raw.RangeStart, End: raw.RangeEnd})
	}
	if len(rs) == 0 {
		return nil, cfgErr(path, "ranges", "", "at least one GUID range is needed",
			`add "ranges": [{"start": "02:00:00:00:00:00:00:00", "end": "02:00:00:00:00:00:ff:ff"}] (GUIDs the subnet manager may put into your PKeys)`)
	}
	size := raw.BlockSize
	if size == 0 {
		size = DefaultBlockSize
	}
	if size < 1 || size > 4096 || size&(size-1) != 0 {
		return nil, cfgErr(path, "blockSize", fmt.Sprint(size), "must be a power of 2 from 1 to 4096", "use 64")
	}
	hostBits := bits.TrailingZeros(uint(size))
	for i, rr := range rs {
		field := fmt.Sprintf("ranges[%d]", i)
		first, err := ParseGUID(rr.Start)
		if err != nil {
			return nil, cfgErr(path, field+".start", rr.Start, err.Error(), "write 8 colon-separated bytes")
		}
		last, err := ParseGUID(rr.End)
		if err != nil {
			return nil, cfgErr(path, field+".end", rr.End, err.Error(), "write 8 colon-separated bytes")
		}
		if last < first {
			return nil, cfgErr(path, field, rr.Start+"-"+rr.End, "end is below start", "swap start and end")
		}
		if first == Zero || last == AllOnes {
			return nil, cfgErr(path, field, rr.Start+"-"+rr.End, "00:00:00:00:00:00:00:00 and ff:ff:ff:ff:ff:ff:ff:ff are not assignable GUIDs",
				"start at ...:01 and end below ff:ff:ff:ff:ff:ff:ff:ff")
		}
		for j, prev := range c.Ranges {
			if first <= prev.Last && prev.First <= last {
				return nil, cfgErr(path, field, rr.Start+"-"+rr.End, fmt.Sprintf("overlaps ranges[%d]", j), "make the ranges disjoint")
			}
		}
		c.Ranges = append(c.Ranges, Range{First: first, Last: last, r: ipamRange(first, last, hostBits)})
	}
	c.Store = ipam.StoreConfig{Type: ipam.StoreKubernetes, Path: DefaultStorePath, TypeFrom: "the default of " + path, KubeconfigFrom: path}
	if s := raw.Store; s != nil {
		if s.Type != "" {
			c.Store.Type, c.Store.TypeFrom = s.Type, `"store.type" in `+path
		}
		if s.Path != "" {
			c.Store.Path = s.Path
		}
		c.Store.Kubeconfig = s.Kubeconfig
	}
	if c.Store.Type != ipam.StoreKubernetes && c.Store.Type != ipam.StoreLocal {
		return nil, cfgErr(path, "store.type", c.Store.Type, `must be "kubernetes" or "local"`, `use "kubernetes" (cluster-wide uniqueness); "local" only for a single node`)
	}
	if raw.HookTimeout != "" {
		d, err := time.ParseDuration(raw.HookTimeout)
		if err != nil || d <= 0 {
			return nil, cfgErr(path, "hookTimeout", raw.HookTimeout, "must be a positive duration", `use e.g. "30s"`)
		}
		c.HookTimeout = d
	}
	if len(c.Hook) > 0 && !strings.HasPrefix(c.Hook[0], "/") {
		return nil, cfgErr(path, "hook", c.Hook[0], "must be an absolute path (the CNI plugin runs with the runtime's PATH)", "write the full path of the hook command")
	}
	return c, nil
}

// ipamRange is the IPAM range of GUIDs first..last: the smallest prefix
// covering both, narrowed to them, in blocks of 2^hostBits GUIDs.
func ipamRange(first, last GUID, hostBits int) *ipam.Range {
	common := bits.LeadingZeros64(uint64(first ^ last))
	if first == last {
		common = 64
	}
	p := netip.PrefixFrom(first.Addr(), 64+common).Masked()
	bb := 128 - hostBits
	if bb < p.Bits() {
		bb = p.Bits()
	}
	return &ipam.Range{Spec: first.String() + "-" + last.String(), Prefix: p, First: first.Addr(), Last: last.Addr(), BlockBits: bb}
}
