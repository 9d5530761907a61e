// Package ipam is rdmanet's cluster-wide IPAM: Whereabouts-compatible config
// parsing, range arithmetic, and an allocator over a block Store (kubernetes
// CRDs or a local file). See docs/ipam.md.
package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	cnitypes "github.com/containernetworking/cni/pkg/types"
)

// Store types.
const (
	StoreLocal      = "local"
	StoreKubernetes = "kubernetes"
)

// Defaults used when neither the network config nor the node config sets a value.
const (
	DefaultNetwork        = "default"
	DefaultLocalStorePath = "/var/lib/rdmanet/ipam"
	// DefaultNodeConfigPath is the node-level config file (the equivalent of
	// Whereabouts' flat file). The agent DaemonSet writes it; its fields are
	// the same as the "ipam" object's and are overridden by the network config.
	DefaultNodeConfigPath = "/etc/cni/net.d/rdmanet-ipam.d/rdmanet-ipam.conf"
	defaultBlockBits4     = 27  // 32 addresses
	defaultBlockBits6     = 123 // 32 addresses
	maxBlockHostBits      = 12  // a block holds at most 4096 addresses (object size)
)

// ErrInvalidConfig is matched (errors.Is) by every config error.
var ErrInvalidConfig = errors.New("invalid rdmanet-ipam config")

// ConfigError names the network, the field, the bad value, the rule and the fix.
type ConfigError struct {
	Network string
	Field   string
	Value   string
	Rule    string
	Fix     string
	Err     error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rdmanet-ipam: network %q: ", e.Network)
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q", e.Field)
		if e.Value != "" {
			fmt.Fprintf(&b, " = %q", e.Value)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Rule)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Fix != "" {
		b.WriteString("; fix: ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying parse error, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

// RawRange is one Whereabouts range entry (top level or in ipRanges).
type RawRange struct {
	Range      string   `json:"range"`
	RangeStart string   `json:"range_start,omitempty"`
	RangeEnd   string   `json:"range_end,omitempty"`
	Exclude    []string `json:"exclude,omitempty"`
}

// RawStore selects and configures the store.
type RawStore struct {
	// Type is "local" or "kubernetes".
	Type string `json:"type,omitempty"`
	// Path is a node-local directory: the allocation file of the local store,
	// and the lock files of the kubernetes store.
	Path string `json:"path,omitempty"`
	// Kubeconfig is the kubeconfig of the kubernetes store.
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// RawKubernetes is Whereabouts' "kubernetes" object.
type RawKubernetes struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	K8sAPIRoot string `json:"k8s_api_root,omitempty"`
}

// RawIPAM is the "ipam" object as written: every Whereabouts field that
// changes allocation or the result, plus rdmanet's store/node fields.
// Whereabouts fields that only tune its own machinery (leader_*, etcd_*,
// sleep_for_race, reconciler_cron_expression, ...) are accepted and ignored;
// keys nobody knows are reported as warnings (see UnknownKeys).
type RawIPAM struct {
	Type string `json:"type"`
	RawRange
	IPRanges      []RawRange        `json:"ipRanges,omitempty"`
	Gateway       string            `json:"gateway,omitempty"`
	NetworkName   string            `json:"network_name,omitempty"`
	Routes        []*cnitypes.Route `json:"routes,omitempty"`
	DNS           cnitypes.DNS      `json:"dns,omitempty"`
	NodeSliceSize string            `json:"node_slice_size,omitempty"`
	// EnableOverlappingRanges (Whereabouts; default true) protects addresses
	// across overlapping ranges of one network_name; false opts out.
	EnableOverlappingRanges *bool          `json:"enable_overlapping_ranges,omitempty"`
	Datastore               string         `json:"datastore,omitempty"`
	Kubernetes              *RawKubernetes `json:"kubernetes,omitempty"`
	// Kubeconfig is accepted at the top level too, as kubernetes.kubeconfig.
	Kubeconfig        string    `json:"kubeconfig,omitempty"`
	ConfigurationPath string    `json:"configuration_path,omitempty"`
	Store             *RawStore `json:"store,omitempty"`
	NodeName          string    `json:"node_name,omitempty"`
	LogFile           string    `json:"log_file,omitempty"`
	LogLevel          string    `json:"log_level,omitempty"`
}

// RawNetConf is the part of the CNI network config the plugin reads.
type RawNetConf struct {
	CNIVersion string   `json:"cniVersion"`
	Name       string   `json:"name"`
	IPAM       *RawIPAM `json:"ipam"`
}

// StoreConfig is the resolved store selection.
type StoreConfig struct {
	Type       string
	Path       string
	Kubeconfig string
	// TypeFrom and KubeconfigFrom say which setting chose Type and
	// Kubeconfig (e.g. `"store.type" in the node config file /etc/...`), so
	// store errors name what to fix.
	TypeFrom, KubeconfigFrom string
}

// Config is a parsed, defaulted and validated IPAM config.
type Config struct {
	CNIVersion string
	// Network is the IPAM network name: network_name, or "default".
	Network string
	Ranges  []*Range
	Routes  []*cnitypes.Route
	DNS     cnitypes.DNS
	Store   StoreConfig
	// NodeName is the node identity; empty means "resolve at run time"
	// (NODENAME env, then the host name).
	NodeName string
	// OverlappingRanges is enable_overlapping_ranges (default true): every
	// range's pool protects the addresses of all overlapping ranges of the
	// same network; false gives each (network, CIDR) its own address space.
	OverlappingRanges bool
	// LogFile and LogLevel are Whereabouts' log_file and log_level.
	LogFile, LogLevel string
	// Warnings are problems that do not stop the plugin (unknown keys),
	// one sentence each, for the CNI log.
	Warnings []string
	// NodeConfigPath is the node config file consulted (for messages).
	NodeConfigPath string
}

// Pool returns the pool r draws from under this config.
func (c *Config) Pool(r *Range) Pool { return r.Pool(c.Network) }

// NodeConfigPath returns where to read the node config for a network config:
// configuration_path when set, otherwise DefaultNodeConfigPath.
func NodeConfigPath(netconf []byte) string {
	var c RawNetConf
	if err := json.Unmarshal(netconf, &c); err == nil && c.IPAM != nil && c.IPAM.ConfigurationPath != "" {
		return c.IPAM.ConfigurationPath
	}
	return DefaultNodeConfigPath
}

// Env holds the environment inputs of Parse (kept explicit so Parse stays pure).
type Env struct {
	// NodeConfig is the content of the node config file (nil when absent).
	NodeConfig []byte
	// NodeConfigPath is where NodeConfig was read from (for messages).
	NodeConfigPath string
	// StorePath overrides the default store path (RDMANET_IPAM_STORE_PATH).
	StorePath string
	// StoreType selects the store when neither config does
	// (RDMANET_IPAM_STORE_TYPE): "local" is how tests and the demo choose the
	// node-local store explicitly.
	StoreType string
}

// Parse turns a CNI network config (stdin of the plugin) into a Config:
// parse → default → validate. It performs no I/O.
func Parse(netconf []byte, env Env) (*Config, error) {
	var nc RawNetConf
	if err := json.Unmarshal(netconf, &nc); err != nil {
		return nil, &ConfigError{Network: "?", Rule: "the network config is not valid JSON", Err: err,
			Fix: "pass the CNI network config (a JSON object) on stdin"}
	}
	if nc.IPAM == nil {
		return nil, &ConfigError{Network: nc.Name, Field: "ipam", Rule: "missing",
			Fix: `add "ipam": {"type": "rdmanet-ipam", "range": "<cidr>"}`}
	}
	var node RawIPAM
	var nodeKeys map[string]any
	if len(env.NodeConfig) > 0 {
		if err := json.Unmarshal(env.NodeConfig, &node); err != nil {
			return nil, &ConfigError{Network: nc.Name, Field: "configuration_path", Value: env.NodeConfigPath, Rule: "the node config file is not valid JSON", Err: err,
				Fix: "repair the node config file or remove it"}
		}
		_ = json.Unmarshal(env.NodeConfig, &nodeKeys)
	}
	cfg, err := build(nc.CNIVersion, nc.Name, nc.IPAM, &node, env)
	if err != nil {
		return nil, err
	}
	var raw struct {
		IPAM map[string]any `json:"ipam"`
	}
	_ = json.Unmarshal(netconf, &raw) // decoded above already; cannot fail differently
	for _, u := range UnknownKeys(raw.IPAM) {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("rdmanet-ipam: network %q: ipam config: %s", nc.Name, u))
	}
	nodeFile := firstNonEmpty(env.NodeConfigPath, DefaultNodeConfigPath)
	for _, u := range UnknownKeys(nodeKeys) {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("rdmanet-ipam: network %q: node config file %s: %s", nc.Name, nodeFile, u))
	}
	return cfg, nil
}

func build(cniVersion, name string, ipam, node *RawIPAM, env Env) (*Config, error) {
	cfg := &Config{CNIVersion: cniVersion, Network: firstNonEmpty(ipam.NetworkName, node.NetworkName, DefaultNetwork)}
	errNet := cfg.Network
	if name != "" && ipam.NetworkName == "" {
		errNet = name + " (network_name unset: pool \"default\")"
	}
	fail := func(field, value, rule, fix string, err error) error {
		return &ConfigError{Network: errNet, Field: field, Value: value, Rule: rule, Fix: fix, Err: err}
	}

	// Store selection (fail closed): network config > node config file >
	// a kubeconfig in either > $RDMANET_IPAM_STORE_TYPE > kubernetes. Only an
	// explicit "local" makes addresses node-local; the kubernetes store
	// without a usable kubeconfig fails ADD (see StoreConfig.check).
	st := StoreConfig{}
	nodeFile := "the node config file " + firstNonEmpty(env.NodeConfigPath, DefaultNodeConfigPath)
	setType := func(typ, from string) {
		if st.Type == "" && typ != "" {
			st.Type, st.TypeFrom = typ, from
		}
	}
	setKubeconfig := func(path, from string) {
		if st.Kubeconfig == "" && path != "" {
			st.Kubeconfig, st.KubeconfigFrom = path, from
		}
	}
	for _, src := range []struct {
		raw   *RawIPAM
		where string
	}{{ipam, "the network config"}, {node, nodeFile}} {
		if s := src.raw.Store; s != nil {
			setType(s.Type, `"store.type" in `+src.where)
			st.Path = firstNonEmpty(st.Path, s.Path)
			setKubeconfig(s.Kubeconfig, `"store.kubeconfig" in `+src.where)
		}
		switch src.raw.Datastore {
		case "":
		case StoreKubernetes:
			setType(StoreKubernetes, `"datastore" in `+src.where)
		default:
			return nil, fail("datastore", src.raw.Datastore, "unsupported datastore",
				`use "datastore": "kubernetes" or "store": {"type": "local"}`, nil)
		}
		if src.raw.Kubernetes != nil {
			setKubeconfig(src.raw.Kubernetes.Kubeconfig, `"kubernetes.kubeconfig" in `+src.where)
		}
		setKubeconfig(src.raw.Kubeconfig, `"kubeconfig" in `+src.where)
	}
	if st.Kubeconfig != "" {
		setType(StoreKubernetes, st.KubeconfigFrom)
	}
	setType(env.StoreType, "$"+EnvStoreType)
	setType(StoreKubernetes, "the default (no store configured: not in the network config, not in "+nodeFile+", not in $"+EnvStoreType+")")
	st.Path = firstNonEmpty(st.Path, env.StorePath, DefaultLocalStorePath)
	switch st.Type {
	case StoreLocal, StoreKubernetes:
	default:
		return nil, fail("store.type", st.Type, "unknown store type (set by "+st.TypeFrom+")", `use "local" or "kubernetes"`, nil)
	}
	cfg.Store = st
	cfg.NodeConfigPath = firstNonEmpty(env.NodeConfigPath, DefaultNodeConfigPath)
	cfg.NodeName = firstNonEmpty(ipam.NodeName, node.NodeName)
	cfg.LogFile = firstNonEmpty(ipam.LogFile, node.LogFile)
	cfg.LogLevel = firstNonEmpty(ipam.LogLevel, node.LogLevel)
	cfg.OverlappingRanges = true                 // Whereabouts' default
	for _, src := range []*RawIPAM{node, ipam} { // network config last: it wins
		if src.EnableOverlappingRanges != nil {
			cfg.OverlappingRanges = *src.EnableOverlappingRanges
		}
	}

	// Ranges: top-level range, then ipRanges (Whereabouts semantics).
	type namedRange struct {
		field string // prefix of the entry's field names
		raw   RawRange
	}
	var raws []namedRange
	if ipam.Range != "" || ipam.RangeStart != "" || ipam.RangeEnd != "" || len(ipam.Exclude) > 0 {
		raws = append(raws, namedRange{"", ipam.RawRange})
	}
	for i, rr := range ipam.IPRanges {
		raws = append(raws, namedRange{fmt.Sprintf("ipRanges[%d].", i), rr})
	}
	if len(raws) == 0 {
		return nil, fail("range", "", "no range configured",
			`set "range": "10.60.0.0/16" (or "ipRanges": [{"range": ...}, ...] for dual-stack)`, nil)
	}
	for _, nr := range raws {
		r, err := parseRange(nr.raw, nr.field, ipam.NodeSliceSize, !cfg.OverlappingRanges, fail)
		if err != nil {
			return nil, err
		}
		cfg.Ranges = append(cfg.Ranges, r)
	}
	for i := range cfg.Ranges {
		for j := i + 1; j < len(cfg.Ranges); j++ {
			if cfg.Ranges[i].Prefix.Overlaps(cfg.Ranges[j].Prefix) {
				return nil, fail("ipRanges", cfg.Ranges[j].Spec, fmt.Sprintf("overlaps range %q of the same config", cfg.Ranges[i].Spec),
					"give each range of one network a distinct CIDR (one range per address family)", nil)
			}
		}
	}

	if ipam.Gateway != "" {
		gw, err := netip.ParseAddr(ipam.Gateway)
		if err != nil {
			return nil, fail("gateway", ipam.Gateway, "not an IP address", "write a plain address such as 10.60.0.1", err)
		}
		gw = gw.Unmap()
		placed := false
		for _, r := range cfg.Ranges {
			if r.Prefix.Contains(gw) {
				r.Gateway = gw
				placed = true
			}
		}
		if !placed {
			return nil, fail("gateway", ipam.Gateway, fmt.Sprintf("outside every range (%s)", rangeSpecs(cfg.Ranges)),
				"use an address inside the range's CIDR, or drop the gateway (the training network needs none)", nil)
		}
	}
	for _, r := range cfg.Ranges {
		if r.Size().Sign() == 0 {
			return nil, fail("exclude", strings.Join(prefixStrings(r.Exclude), ","),
				fmt.Sprintf("range %q has no usable address left after range_start/range_end, exclude and gateway", r.Spec),
				"shrink exclude or widen the range", nil)
		}
	}

	for i, rt := range ipam.Routes {
		if rt == nil || rt.Dst.IP == nil {
			return nil, fail(fmt.Sprintf("routes[%d].dst", i), "", "missing destination", `write {"dst": "10.61.0.0/16"}`, nil)
		}
	}
	cfg.Routes = ipam.Routes
	cfg.DNS = ipam.DNS
	return cfg, nil
}

// parseRange parses one range entry: CIDR or "a.b.c.d-a.b.c.e/prefix",
// range_start, range_end, exclude. isolated is !enable_overlapping_ranges.
func parseRange(rr RawRange, fieldPrefix, sliceSize string, isolated bool, fail func(field, value, rule, fix string, err error) error) (*Range, error) {
	r := &Range{Spec: rr.Range, Isolated: isolated}
	field := fieldPrefix + "range"
	if rr.Range == "" {
		return nil, fail(field, "", "missing", `set it to a CIDR such as "10.60.0.0/16" or "10.60.0.10-10.60.0.200/16"`, nil)
	}
	text := strings.TrimSpace(rr.Range)
	var start, end netip.Addr
	if dash := strings.IndexByte(text, '-'); dash >= 0 {
		slash := strings.LastIndexByte(text, '/')
		if slash < dash {
			return nil, fail(field, rr.Range, "a start-end range needs a prefix length",
				`write it as "10.60.0.10-10.60.0.200/16"`, nil)
		}
		var err1, err2 error
		start, err1 = netip.ParseAddr(text[:dash])
		end, err2 = netip.ParseAddr(text[dash+1 : slash])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fail(field, rr.Range, "start or end is not an IP address", `write it as "10.60.0.10-10.60.0.200/16"`, err)
		}
		text = text[:dash] + text[slash:]
	}
	p, err := netip.ParsePrefix(text)
	if err != nil {
		return nil, fail(field, rr.Range, "not a CIDR", `write it as "10.60.0.0/16" or "fd00:60::/64"`, err)
	}
	if p.Addr().Is4In6() {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	if p.Addr().Zone() != "" {
		return nil, fail(field, rr.Range, "zoned addresses are not allowed", "drop the %zone", nil)
	}
	masked := p.Masked()
	if !start.IsValid() && p.Addr() != masked.Addr() {
		// Whereabouts: "192.168.2.225/28" hands out .225 upwards.
		start = p.Addr()
	}
	r.Prefix = masked
	r.First, r.Last = masked.Addr(), lastAddr(masked)
	hostBits := masked.Addr().BitLen() - masked.Bits()
	if masked.Addr().Is4() && hostBits >= 2 {
		r.First, r.Last = r.First.Next(), r.Last.Prev() // network and broadcast
	} else if masked.Addr().Is6() && hostBits >= 2 {
		r.First = r.First.Next() // subnet-router anycast
	}

	inRange := func(name, value string, a netip.Addr) error {
		if a.BitLen() != masked.Addr().BitLen() || !masked.Contains(a) {
			return fail(name, value, fmt.Sprintf("outside the range's CIDR %s", masked),
				"use an address inside the range's CIDR", nil)
		}
		return nil
	}
	for _, b := range []struct {
		name, text string
		dst        *netip.Addr
	}{{fieldPrefix + "range_start", rr.RangeStart, &start}, {fieldPrefix + "range_end", rr.RangeEnd, &end}} {
		if b.text == "" {
			continue
		}
		a, err := netip.ParseAddr(strings.TrimSpace(b.text))
		if err != nil {
			return nil, fail(b.name, b.text, "not an IP address", "write a plain address such as 10.60.0.10", err)
		}
		a = a.Unmap()
		if b.dst.IsValid() && *b.dst != a {
			return nil, fail(b.name, b.text, fmt.Sprintf("conflicts with the bound %s written in range %q", *b.dst, rr.Range),
				"set the bound in one place only", nil)
		}
		*b.dst = a
	}
	if start.IsValid() {
		if err := inRange(fieldPrefix+"range_start", start.String(), start); err != nil {
			return nil, err
		}
		r.First = addrMax(r.First, start)
	}
	if end.IsValid() {
		if err := inRange(fieldPrefix+"range_end", end.String(), end); err != nil {
			return nil, err
		}
		r.Last = addrMin(r.Last, end)
	}
	if r.Last.Less(r.First) {
		return nil, fail(field, rr.Range, fmt.Sprintf("range_start %s is after range_end %s (after removing the network/broadcast addresses)", r.First, r.Last),
			"swap range_start and range_end or widen the CIDR", nil)
	}

	for i, ex := range rr.Exclude {
		name := fmt.Sprintf("%sexclude[%d]", fieldPrefix, i)
		s := strings.TrimSpace(ex)
		var e netip.Prefix
		if strings.Contains(s, "/") {
			e, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(s); err == nil {
				e = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			return nil, fail(name, ex, "not a CIDR or IP address", `write it as "10.60.0.0/24"`, err)
		}
		if e.Addr().Is4In6() {
			e = netip.PrefixFrom(e.Addr().Unmap(), e.Bits()-96)
		}
		e = e.Masked()
		if e.Addr().BitLen() != masked.Addr().BitLen() {
			return nil, fail(name, ex, fmt.Sprintf("address family differs from range %q", rr.Range),
				"put each family's excludes in its own ipRanges entry", nil)
		}
		r.Exclude = append(r.Exclude, e)
	}
	r.Exclude = normalizeExcludes(r.Exclude)

	bits := defaultBlockBits4
	if masked.Addr().Is6() {
		bits = defaultBlockBits6
	}
	if sliceSize != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(sliceSize), "/"))
		if err != nil {
			return nil, fail("node_slice_size", sliceSize, "not a prefix length", `write it as "/26"`, err)
		}
		if n > masked.Addr().BitLen() || masked.Addr().BitLen()-n > maxBlockHostBits {
			return nil, fail("node_slice_size", sliceSize,
				fmt.Sprintf("blocks must hold between 1 and %d addresses", 1<<maxBlockHostBits),
				fmt.Sprintf("use a prefix length between /%d and /%d", masked.Addr().BitLen()-maxBlockHostBits, masked.Addr().BitLen()), nil)
		}
		bits = n
	}
	// An isolated pool's blocks lie inside its range. Blocks of a network
	// shared by overlapping ranges have the slice size even when the range
	// is smaller, so every range of the network claims the same aligned
	// block (one name, one create that can win) for the same addresses.
	r.BlockBits = bits
	if isolated {
		r.BlockBits = max(bits, masked.Bits())
	}
	return r, nil
}

// normalizeExcludes sorts prefixes and drops those nested in another.
func normalizeExcludes(in []netip.Prefix) []netip.Prefix {
	slices.SortFunc(in, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var out []netip.Prefix
	for _, p := range in {
		if n := len(out); n > 0 && out[n-1].Overlaps(p) {
			continue // sorted: the earlier (shorter or equal) prefix contains p
		}
		out = append(out, p)
	}
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func rangeSpecs(rs []*Range) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.Prefix.String()
	}
	return strings.Join(s, ", ")
}
