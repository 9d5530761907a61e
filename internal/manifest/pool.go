package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
)

// PoolKind is the resource model of a device plugin pool.
type PoolKind string

const (
	// PoolExclusive: SR-IOV network device plugin pool, one VF per unit.
	PoolExclusive PoolKind = "exclusive"
	// PoolShared: rdma-shared-dev-plugin pool, rdmaHcaMax slots per HCA.
	PoolShared PoolKind = "shared"
)

// Pool is one resource pool of a device plugin configuration.
type Pool struct {
	Obj   *Object
	Field string // e.g. data[config.json].resourceList[0]
	Kind  PoolKind

	Prefix string
	Name   string

	// Selectors, flattened over all selector objects of the pool.
	PFNames     []string // SR-IOV: pfNames, "#range" suffix stripped
	IfNames     []string // shared: ifNames / legacy devices
	RootDevices []string
	Vendors     []string
	Devices     []string // device IDs
	Drivers     []string
	LinkTypes   []string
	IsRdma      bool
	HasSelector bool // at least one non-empty selector

	RdmaHcaMax    int
	HasRdmaHcaMax bool
}

// FullName is prefix/name, the extended resource pods request.
func (p *Pool) FullName() string {
	if p.Prefix == "" {
		return p.Name
	}
	return p.Prefix + "/" + p.Name
}

// Interfaces are the netdevs (PFs) the pool selects by name.
func (p *Pool) Interfaces() []string {
	out := append([]string(nil), p.PFNames...)
	return append(out, p.IfNames...)
}

// PoolConfigError is a pool configuration the agent refuses, or, with
// Warning, one it reads with a warning (config.ParseFile's).
type PoolConfigError struct {
	Obj     *Object
	Field   string
	Err     error
	Warning bool
}

func (e *PoolConfigError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Obj.Ref(), e.Field, e.Err)
}

// Default resource prefixes of the upstream device plugins.
const (
	SRIOVDefaultPrefix  = "intel.com"
	SharedDefaultPrefix = "rdma"
)

// PoolsFromObject extracts device plugin pools from a ConfigMap (any data key
// holding a "resourceList" or "configList" document), a NicClusterPolicy
// (spec.sriovDevicePlugin.config, spec.rdmaSharedDevicePlugin.config) or a
// SriovNetworkNodePolicy.
func PoolsFromObject(o *Object) ([]*Pool, []*PoolConfigError) {
	switch {
	case o.Kind == "ConfigMap" && o.Group() == "":
		data, _ := o.Data["data"].(map[string]any)
		var pools []*Pool
		var errs []*PoolConfigError
		for _, k := range slices.Sorted(maps.Keys(data)) {
			s, _ := data[k].(string)
			if !looksLikePoolConfig(s) {
				continue
			}
			p, e := parsePoolConfig(o, "data["+k+"]", s)
			pools = append(pools, p...)
			errs = append(errs, e...)
		}
		return pools, errs
	case o.Kind == "NicClusterPolicy" && o.Group() == "mellanox.com":
		var pools []*Pool
		var errs []*PoolConfigError
		for _, f := range []string{"spec.sriovDevicePlugin.config", "spec.rdmaSharedDevicePlugin.config"} {
			if s := GetString(o.Data, f); strings.TrimSpace(s) != "" {
				p, e := parsePoolConfig(o, f, s)
				pools = append(pools, p...)
				errs = append(errs, e...)
			}
		}
		return pools, errs
	case o.Kind == "SriovNetworkNodePolicy" && o.Group() == "sriovnetwork.openshift.io":
		p := &Pool{Obj: o, Field: "spec", Kind: PoolExclusive, Prefix: "openshift.io", Name: GetString(o.Data, "spec.resourceName")}
		p.PFNames = stripRanges(StringList(GetAny(o.Data, "spec.nicSelector.pfNames")))
		p.RootDevices = StringList(GetAny(o.Data, "spec.nicSelector.rootDevices"))
		if v := GetString(o.Data, "spec.nicSelector.vendor"); v != "" {
			p.Vendors = []string{v}
		}
		if lt := GetString(o.Data, "spec.linkType"); lt != "" {
			p.LinkTypes = []string{lt}
		}
		p.IsRdma = GetAny(o.Data, "spec.isRdma") == true
		p.HasSelector = len(p.PFNames)+len(p.RootDevices)+len(p.Vendors) > 0
		return []*Pool{p}, nil
	}
	return nil, nil
}

// looksLikePoolConfig tells whether a ConfigMap value is meant as a device
// plugin config: a JSON object with a top-level resourceList or configList
// (or one that fails to parse but names them, so the error is reported).
func looksLikePoolConfig(s string) bool {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "{") {
		return false
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal([]byte(t), &probe); err != nil {
		return strings.Contains(t, `"resourceList"`) || strings.Contains(t, `"configList"`)
	}
	// keys in any case, as the plugins' encoding/json reads them
	for k := range probe {
		if strings.EqualFold(k, "resourceList") || strings.EqualFold(k, "configList") {
			return true
		}
	}
	return false
}

// parsePoolConfig judges a pool config with the agent's own parser
// (config.ParseFile), so lint and the agent never disagree: a file the
// agent refuses is one error with the agent's message; the parser's
// warnings (keys in another case, unknown keys, pools rdmanet skips,
// selector values that never match) are warnings; the pools rdmanet serves
// are the pools lint judges further.
func parsePoolConfig(o *Object, field, s string) ([]*Pool, []*PoolConfigError) {
	f, err := config.ParseFile(o.Ref()+" "+field, []byte(s))
	if err != nil {
		return nil, []*PoolConfigError{{Obj: o, Field: field, Err: err}}
	}
	var errs []*PoolConfigError
	for _, w := range f.Warnings {
		errs = append(errs, &PoolConfigError{Obj: o, Field: entryField(field, w.Origin, w.Field), Err: errors.New(w.String()), Warning: true})
	}
	pools := make([]*Pool, 0, len(f.Pools))
	for _, cp := range f.Pools {
		p := &Pool{Obj: o, Field: entryField(field, cp.Origin, ""), Prefix: cp.Prefix, Name: cp.Name}
		switch cp.Kind {
		case config.Exclusive:
			p.Kind = PoolExclusive
			for _, sel := range cp.Selectors {
				for _, pf := range sel.PFNames {
					p.PFNames = append(p.PFNames, pf.Name)
				}
				p.RootDevices = append(p.RootDevices, sel.RootDevices...)
				p.RootDevices = append(p.RootDevices, sel.PCIAddresses...)
				p.Vendors = append(p.Vendors, sel.Vendors...)
				p.Devices = append(p.Devices, sel.Devices...)
				p.Drivers = append(p.Drivers, sel.Drivers...)
				p.LinkTypes = append(p.LinkTypes, sel.LinkTypes...)
				p.IsRdma = p.IsRdma || sel.IsRdma
				if len(sel.PFNames)+len(sel.RootDevices)+len(sel.PCIAddresses)+len(sel.Vendors)+len(sel.Devices)+len(sel.Drivers)+len(sel.LinkTypes) > 0 || sel.IsRdma {
					p.HasSelector = true
				}
			}
		case config.Shared:
			p.Kind = PoolShared
			sh := cp.Shared
			p.IfNames, p.Vendors, p.Devices, p.Drivers, p.LinkTypes = sh.IfNames, sh.Vendors, sh.DeviceIDs, sh.Drivers, sh.LinkTypes
			p.HasSelector = len(p.IfNames)+len(p.Vendors)+len(p.Devices)+len(p.Drivers)+len(p.LinkTypes) > 0
			p.RdmaHcaMax, p.HasRdmaHcaMax = cp.RdmaHcaMax, true
			p.IsRdma = true
		}
		pools = append(pools, p)
	}
	return pools, errs
}

var entryRe = regexp.MustCompile(`(resourceList|configList)\[\d+\]`)

// entryField is the lint field of a pool (or of a field of it) named by the
// parser's origin: data[config.json].resourceList[0].selectors.IsRdma.
func entryField(field, origin, sub string) string {
	if m := entryRe.FindAllString(origin, -1); len(m) > 0 {
		field += "." + m[len(m)-1]
	}
	if sub != "" {
		field += "." + sub
	}
	return field
}

// stripRanges removes the "#0-7" VF range suffix of SR-IOV pfNames selectors.
func stripRanges(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if i := strings.IndexByte(n, '#'); i >= 0 {
			n = n[:i]
		}
		out = append(out, n)
	}
	return out
}

// Intersect returns the sorted common elements of two lists.
func Intersect(a, b []string) []string {
	set := map[string]bool{}
	for _, x := range a {
		set[x] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, y := range b {
		if set[y] && !seen[y] {
			out = append(out, y)
			seen[y] = true
		}
	}
	sort.Strings(out)
	return out
}
