// Package config parses device plugin pool configuration in both upstream
// formats, read the way the upstream plugins read them:
//
//   - the SR-IOV Network Device Plugin's `resourceList` (exclusive VF pools),
//   - the rdma-shared-dev-plugin's `configList` (shared HCA pools).
//
// A file may hold either key or both, as bare JSON, or wrapped the way
// clusters carry it: a ConfigMap whose data holds the JSON, or a
// NicClusterPolicy whose spec.rdmaSharedDevicePlugin.config (or
// spec.sriovDevicePlugin.config) holds it. Parsing is pure: no file system,
// no sysfs.
//
// Both upstream plugins decode with Go's encoding/json: keys match
// case-insensitively and unknown keys are ignored. This package decodes the
// same way and reports each such key as a Warning. A pool of a kind rdmanet
// does not serve (accelerator, auxNetDevice, DPDK/vhost-net, vDPA, DDP, PKey or
// ACPI-index selection) is skipped with a Warning naming it; a pool whose
// selectors upstream cannot decode is skipped as upstream skips it. A file is
// refused only where upstream refuses it, or where upstream's answer would
// fail later anyway (a resource name kubelet refuses, a shared pool of zero
// slots); the error then says why. Selector values are kept verbatim, since
// upstream compares them verbatim with what sysfs shows; a value that can
// never match gets a Warning. See docs/pool-config.md.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Kind of pool.
type Kind string

const (
	Exclusive Kind = "exclusive" // one device per SR-IOV VF (or VF-less PF)
	Shared    Kind = "shared"    // rdmaHcaMax slots over shared HCAs
)

// Link types as both upstream plugins spell them.
const (
	LinkEther      = "ether"
	LinkInfiniBand = "infiniband"
)

// DefaultSharedPrefix is rdma-shared-dev-plugin's default resourcePrefix.
const DefaultSharedPrefix = "rdma"

// DefaultSriovPrefix is the SR-IOV Network Device Plugin's default resourcePrefix.
const DefaultSriovPrefix = "intel.com"

// MaxRdmaHcaMax bounds rdmaHcaMax: the agent advertises one device per slot.
const MaxRdmaHcaMax = 10000

// maxVFIndex is the largest VF index a PF can have (TotalVFs is 16 bits).
const maxVFIndex = 65535

// PFName is one pfNames entry: a PF netdev name and optionally VF indexes (ens1f0#0-3,7).
type PFName struct {
	Name string
	// VFs: nil selects every VF of the PF; a non-nil empty list selects
	// none (an entry whose VF list upstream cannot read).
	VFs []int
}

func (p PFName) String() string {
	if p.VFs == nil {
		return p.Name
	}
	parts := make([]string, len(p.VFs))
	for i, v := range p.VFs {
		parts[i] = strconv.Itoa(v)
	}
	return p.Name + "#" + strings.Join(parts, ",")
}

// SriovSelector is one selector group of an SR-IOV pool; all set fields must match.
type SriovSelector struct {
	Vendors      []string
	Devices      []string
	Drivers      []string
	PCIAddresses []string
	PFNames      []PFName
	RootDevices  []string
	LinkTypes    []string
	IsRdma       bool
}

// SharedSelector selects HCAs for a shared pool; all set fields must match.
type SharedSelector struct {
	Vendors   []string
	DeviceIDs []string
	Drivers   []string
	IfNames   []string
	LinkTypes []string
}

// Pool is one resource the agent advertises.
type Pool struct {
	Kind   Kind
	Prefix string
	Name   string
	Origin string // "file.json: resourceList[0]" — for messages

	// Exclusive pools: a device matches when any selector group matches.
	Selectors []SriovSelector
	// Shared pools.
	RdmaHcaMax int
	Shared     SharedSelector
}

// Resource is the extended resource name, prefix/name.
func (p Pool) Resource() string { return p.Prefix + "/" + p.Name }

// NeedsRDMA reports whether the pool hands out RDMA devices (and so depends
// on the RDMA subsystem's netns mode).
func (p Pool) NeedsRDMA() bool {
	if p.Kind == Shared {
		return true
	}
	for _, s := range p.Selectors {
		if s.IsRdma {
			return true
		}
	}
	return false
}

// Error is a configuration error naming the pool, field, value and fix.
type Error struct {
	Origin string
	Field  string
	Value  string
	Rule   string
	Fix    string
	Err    error // the decoder's error, when there is one
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Origin)
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	if e.Value != "" {
		b.WriteString(" = " + e.Value)
	}
	b.WriteString(": " + e.Rule)
	if e.Fix != "" {
		b.WriteString("; fix: " + e.Fix)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Warning is input rdmanet accepts, as upstream does, but that is probably
// not what its author meant: a key in another case, an unknown key, a pool
// rdmanet skips, a selector value that can never match.
type Warning struct {
	Origin string
	// Pool is the resource (prefix/name) of the pool the warning is
	// about, "" for a warning about the file (a top-level key).
	Pool  string
	Field string
	Value string
	Note  string // what rdmanet (and upstream) does with it
	Fix   string
}

func (w Warning) String() string {
	e := Error{Origin: w.Origin, Field: w.Field, Value: w.Value, Rule: w.Note, Fix: w.Fix}
	return e.Error()
}

// Skipped is a pool of the file that rdmanet does not serve.
type Skipped struct {
	Origin   string
	Resource string // prefix/name as upstream would advertise it
	Reason   string
}

// File is what one configuration file gives.
type File struct {
	Pools    []Pool    // the pools rdmanet serves
	Skipped  []Skipped // pools rdmanet does not serve (each also has a Warning)
	Warnings []Warning

	dropped []string // pools dropped for selectors upstream cannot decode, with why
}

// Parse reads one configuration file's bytes and returns the pools rdmanet
// serves. name is used in messages. Parse is for callers that cannot show
// warnings: a file that leaves rdmanet nothing to serve is an error naming
// every pool it skipped. Use ParseFile to get the warnings.
func Parse(name string, data []byte) ([]Pool, error) {
	f, err := ParseFile(name, data)
	if err != nil {
		return nil, err
	}
	if len(f.Pools) == 0 {
		var why []string
		for _, s := range f.Skipped {
			why = append(why, fmt.Sprintf("%s (%s): %s", s.Origin, s.Resource, s.Reason))
		}
		return nil, &Error{Origin: name, Rule: "holds no pool rdmanet serves: " + strings.Join(why, "; "), Fix: "give rdmanet the RDMA pools (netDevice pools of VFs, or rdma-shared-dev-plugin pools)"}
	}
	return f.Pools, nil
}

// ParseFile reads one configuration file's bytes. name is used in messages.
func ParseFile(name string, data []byte) (*File, error) {
	docs, err := unwrap(name, data)
	if err != nil {
		return nil, err
	}
	f := &File{}
	entries := 0
	var seenKeys []string
	for _, d := range docs {
		n, keys, err := parseJSON(f, d.origin, d.data)
		if err != nil {
			return nil, err
		}
		entries += n
		seenKeys = append(seenKeys, keys...)
	}
	tagPools(f)
	if entries == 0 {
		e := &Error{Origin: name, Rule: "holds no resourceList or configList entries", Fix: "give the SR-IOV device plugin config.json (resourceList) or the rdma-shared-dev-plugin config (configList)"}
		if len(seenKeys) > 0 {
			e.Rule += " (keys found: " + strings.Join(seenKeys, ", ") + ")"
		}
		return nil, e
	}
	if len(f.Pools) == 0 && len(f.Skipped) == 0 {
		// every resourceList entry was dropped for selectors upstream cannot decode
		return nil, &Error{Origin: name, Rule: "no pool is left once the pools whose selectors cannot be decoded are dropped, and the SR-IOV device plugin exits with \"no resource configuration\": " + strings.Join(f.dropped, "; "), Fix: `write "selectors" as an object of selector lists, or a non-empty list of such objects, e.g. {"vendors":["15b3"],"isRdma":true}`}
	}
	return f, nil
}

// tagPools sets Warning.Pool: every warning about a pool has an Origin
// ending in " (<prefix>/<name>)", the pool's entry named as in Pool.Origin.
func tagPools(f *File) {
	for i := range f.Warnings {
		w := &f.Warnings[i]
		o := w.Origin
		if !strings.HasSuffix(o, ")") {
			continue
		}
		open := strings.LastIndex(o, " (")
		if open < 0 || !strings.Contains(o[:open], "List[") {
			continue
		}
		w.Pool = o[open+2 : len(o)-1]
	}
}

// Merge joins pools from several files and refuses duplicate resource names.
func Merge(sets ...[]Pool) ([]Pool, error) {
	seen := map[string]string{}
	var out []Pool
	for _, set := range sets {
		for _, p := range set {
			if prev, ok := seen[p.Resource()]; ok {
				return nil, &Error{Origin: p.Origin, Field: "resourceName", Value: p.Resource(), Rule: "already defined by " + prev, Fix: "give each pool a distinct resourcePrefix/resourceName"}
			}
			seen[p.Resource()] = p.Origin
			out = append(out, p)
		}
	}
	return out, nil
}

type doc struct {
	origin string
	data   []byte
}

// unwrap finds the JSON config(s) in raw JSON, a ConfigMap or a NicClusterPolicy (multi-document YAML allowed).
func unwrap(name string, data []byte) ([]doc, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, &Error{Origin: name, Rule: "file is empty", Fix: "give a resourceList or configList JSON document"}
	}
	if trimmed[0] == '{' {
		return []doc{{name, trimmed}}, nil
	}
	var out []doc
	for i, part := range splitYAML(trimmed) {
		var obj struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
			Spec struct {
				RdmaShared *struct {
					Config string `json:"config"`
				} `json:"rdmaSharedDevicePlugin"`
				Sriov *struct {
					Config string `json:"config"`
				} `json:"sriovDevicePlugin"`
			} `json:"spec"`
			ResourceList json.RawMessage `json:"resourceList"`
			ConfigList   json.RawMessage `json:"configList"`
		}
		if err := yaml.Unmarshal(part, &obj); err != nil {
			return nil, &Error{Origin: fmt.Sprintf("%s (document %d)", name, i+1), Rule: "not valid JSON or YAML: " + err.Error(), Fix: "check the syntax near the reported line", Err: err}
		}
		switch {
		case obj.Kind == "ConfigMap":
			keys := make([]string, 0, len(obj.Data))
			for k := range obj.Data {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				v := strings.TrimSpace(obj.Data[k])
				lv := strings.ToLower(v)
				if strings.HasPrefix(v, "{") && (strings.Contains(lv, "resourcelist") || strings.Contains(lv, "configlist")) {
					out = append(out, doc{fmt.Sprintf("%s: ConfigMap data[%s]", name, k), []byte(v)})
				}
			}
		case obj.Kind == "NicClusterPolicy":
			if obj.Spec.RdmaShared != nil && strings.TrimSpace(obj.Spec.RdmaShared.Config) != "" {
				out = append(out, doc{name + ": NicClusterPolicy spec.rdmaSharedDevicePlugin.config", []byte(obj.Spec.RdmaShared.Config)})
			}
			if obj.Spec.Sriov != nil && strings.TrimSpace(obj.Spec.Sriov.Config) != "" {
				out = append(out, doc{name + ": NicClusterPolicy spec.sriovDevicePlugin.config", []byte(obj.Spec.Sriov.Config)})
			}
		case obj.ResourceList != nil || obj.ConfigList != nil:
			j, err := yaml.YAMLToJSON(part)
			if err != nil {
				return nil, &Error{Origin: name, Rule: "cannot convert YAML to JSON: " + err.Error(), Err: err}
			}
			out = append(out, doc{name, j})
		}
		// other kinds (MacvlanNetwork, NADs, ...) in the same file are ignored
	}
	return out, nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

func splitYAML(b []byte) [][]byte {
	var out [][]byte
	for _, p := range docSep.Split(string(b), -1) {
		if strings.TrimSpace(p) != "" {
			out = append(out, []byte(p))
		}
	}
	return out
}
