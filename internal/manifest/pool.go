package manifest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
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

// PoolConfigError is a pool configuration that cannot be decoded.
type PoolConfigError struct {
	Obj   *Object
	Field string
	Err   error
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
		for _, k := range sortedKeys(data) {
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
	_, a := probe["resourceList"]
	_, b := probe["configList"]
	return a || b
}

func parsePoolConfig(o *Object, field, s string) ([]*Pool, []*PoolConfigError) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &probe); err != nil {
		return nil, []*PoolConfigError{{Obj: o, Field: field, Err: fmt.Errorf("not valid JSON: %w", err)}}
	}
	var pools []*Pool
	var errs []*PoolConfigError
	if raw, ok := probe["resourceList"]; ok {
		var list []map[string]any
		if err := json.Unmarshal(raw, &list); err != nil {
			errs = append(errs, &PoolConfigError{Obj: o, Field: field + ".resourceList", Err: fmt.Errorf("want a list of resource objects: %w", err)})
		}
		for i, r := range list {
			f := fmt.Sprintf("%s.resourceList[%d]", field, i)
			p := &Pool{Obj: o, Field: f, Kind: PoolExclusive}
			p.Prefix, _ = r["resourcePrefix"].(string)
			if p.Prefix == "" {
				p.Prefix = SRIOVDefaultPrefix
			}
			p.Name, _ = r["resourceName"].(string)
			// selectors: an object (older format) or a list of objects.
			var sels []map[string]any
			switch t := r["selectors"].(type) {
			case map[string]any:
				sels = []map[string]any{t}
			case []any:
				for _, it := range t {
					if m, ok := it.(map[string]any); ok {
						sels = append(sels, m)
					}
				}
			}
			for _, sel := range sels {
				p.PFNames = append(p.PFNames, stripRanges(StringList(sel["pfNames"]))...)
				p.RootDevices = append(p.RootDevices, StringList(sel["rootDevices"])...)
				p.Vendors = append(p.Vendors, StringList(sel["vendors"])...)
				p.Devices = append(p.Devices, StringList(sel["devices"])...)
				p.Drivers = append(p.Drivers, StringList(sel["drivers"])...)
				p.LinkTypes = append(p.LinkTypes, StringList(sel["linkTypes"])...)
				p.RootDevices = append(p.RootDevices, StringList(sel["pciAddresses"])...)
				if sel["isRdma"] == true {
					p.IsRdma = true
				}
				if len(sel) > 0 {
					p.HasSelector = true
				}
			}
			pools = append(pools, p)
		}
	}
	if raw, ok := probe["configList"]; ok {
		var list []map[string]any
		if err := json.Unmarshal(raw, &list); err != nil {
			errs = append(errs, &PoolConfigError{Obj: o, Field: field + ".configList", Err: fmt.Errorf("want a list of resource objects: %w", err)})
		}
		for i, r := range list {
			f := fmt.Sprintf("%s.configList[%d]", field, i)
			p := &Pool{Obj: o, Field: f, Kind: PoolShared}
			p.Prefix, _ = r["resourcePrefix"].(string)
			if p.Prefix == "" {
				p.Prefix = SharedDefaultPrefix
			}
			p.Name, _ = r["resourceName"].(string)
			if v, ok := r["rdmaHcaMax"]; ok {
				p.RdmaHcaMax, _ = Int(v)
				p.HasRdmaHcaMax = true
			}
			p.IfNames = append(p.IfNames, StringList(r["devices"])...) // legacy form
			if sel, ok := r["selectors"].(map[string]any); ok {
				p.IfNames = append(p.IfNames, StringList(sel["ifNames"])...)
				p.Vendors = append(p.Vendors, StringList(sel["vendors"])...)
				p.Devices = append(p.Devices, StringList(sel["deviceIDs"])...)
				p.Drivers = append(p.Drivers, StringList(sel["drivers"])...)
				p.LinkTypes = append(p.LinkTypes, StringList(sel["linkTypes"])...)
				p.RootDevices = append(p.RootDevices, StringList(sel["rootDevices"])...)
			}
			p.HasSelector = len(p.IfNames)+len(p.Vendors)+len(p.Devices)+len(p.Drivers)+len(p.LinkTypes)+len(p.RootDevices) > 0
			p.IsRdma = true
			pools = append(pools, p)
		}
	}
	if _, ok := probe["resourceList"]; !ok {
		if _, ok := probe["configList"]; !ok {
			errs = append(errs, &PoolConfigError{Obj: o, Field: field, Err: fmt.Errorf("has neither \"resourceList\" (SR-IOV network device plugin) nor \"configList\" (rdma-shared-dev-plugin)")})
		}
	}
	return pools, errs
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
