// Package config parses device plugin pool configuration in both upstream
// formats, verbatim:
//
//   - the SR-IOV Network Device Plugin's `resourceList` (exclusive VF pools),
//   - the rdma-shared-dev-plugin's `configList` (shared HCA pools).
//
// A file may hold either key or both, as bare JSON, or wrapped the way
// clusters carry it: a ConfigMap whose data holds the JSON, or a
// NicClusterPolicy whose spec.rdmaSharedDevicePlugin.config (or
// spec.sriovDevicePlugin.config) holds it. Parsing is pure: no file system,
// no sysfs.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
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

// PFName is one pfNames entry: a PF netdev name and optionally VF indexes (ens1f0#0-3,7).
type PFName struct {
	Name string
	VFs  []int // nil: every VF
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

// Parse reads one configuration file's bytes. name is used in messages.
func Parse(name string, data []byte) ([]Pool, error) {
	docs, err := unwrap(name, data)
	if err != nil {
		return nil, err
	}
	var pools []Pool
	for _, d := range docs {
		ps, err := parseJSON(d.origin, d.data)
		if err != nil {
			return nil, err
		}
		pools = append(pools, ps...)
	}
	if len(pools) == 0 {
		return nil, &Error{Origin: name, Rule: "holds no resourceList or configList entries", Fix: "give the SR-IOV device plugin config.json (resourceList) or the rdma-shared-dev-plugin config (configList)"}
	}
	return pools, nil
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
			return nil, &Error{Origin: fmt.Sprintf("%s (document %d)", name, i+1), Rule: "not valid JSON or YAML: " + err.Error(), Fix: "check the syntax near the reported line"}
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
				if strings.HasPrefix(v, "{") && (strings.Contains(v, "resourceList") || strings.Contains(v, "configList")) {
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
				return nil, &Error{Origin: name, Rule: "cannot convert YAML to JSON: " + err.Error()}
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

// wire formats -------------------------------------------------------------

type wireFile struct {
	ResourceList []json.RawMessage `json:"resourceList"`
	ConfigList   []json.RawMessage `json:"configList"`
	// rdma-shared-dev-plugin also accepts a top-level periodicUpdateInterval
	PeriodicUpdateInterval *int `json:"periodicUpdateInterval,omitempty"`
}

type wireSriovResource struct {
	ResourcePrefix  string          `json:"resourcePrefix"`
	ResourceName    string          `json:"resourceName"`
	DeviceType      string          `json:"deviceType"`
	ExcludeTopology bool            `json:"excludeTopology"`
	Selectors       json.RawMessage `json:"selectors"`
	AdditionalInfo  json.RawMessage `json:"additionalInfo"`
}

type wireSriovSelector struct {
	Vendors      []string `json:"vendors"`
	Devices      []string `json:"devices"`
	Drivers      []string `json:"drivers"`
	PCIAddresses []string `json:"pciAddresses"`
	PFNames      []string `json:"pfNames"`
	RootDevices  []string `json:"rootDevices"`
	LinkTypes    []string `json:"linkTypes"`
	IsRdma       bool     `json:"isRdma"`
	NeedVhostNet bool     `json:"needVhostNet"`
	DDPProfiles  []string `json:"ddpProfiles"`
	VdpaType     string   `json:"vdpaType"`
	PKeys        []string `json:"pKeys"`
	AuxTypes     []string `json:"auxTypes"`
	ACPIIndexes  []string `json:"acpiIndexes"`
}

type wireShared struct {
	ResourceName   string          `json:"resourceName"`
	ResourcePrefix string          `json:"resourcePrefix"`
	RdmaHcaMax     *int            `json:"rdmaHcaMax"`
	Devices        []string        `json:"devices"` // legacy: netdev names
	Selectors      json.RawMessage `json:"selectors"`
}

type wireSharedSelector struct {
	Vendors   []string `json:"vendors"`
	DeviceIDs []string `json:"deviceIDs"`
	Drivers   []string `json:"drivers"`
	IfNames   []string `json:"ifNames"`
	LinkTypes []string `json:"linkTypes"`
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func parseJSON(origin string, data []byte) ([]Pool, error) {
	var f wireFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, jsonError(origin, "", err)
	}
	var out []Pool
	for i, raw := range f.ResourceList {
		p, err := parseSriov(fmt.Sprintf("%s: resourceList[%d]", origin, i), raw)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	for i, raw := range f.ConfigList {
		p, err := parseShared(fmt.Sprintf("%s: configList[%d]", origin, i), raw)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func jsonError(origin, ctx string, err error) error {
	var typeErr *json.UnmarshalTypeError
	msg := err.Error()
	fix := "check the JSON syntax"
	switch {
	case errors.As(err, &typeErr):
		return &Error{Origin: origin, Field: strings.TrimPrefix(ctx+"."+typeErr.Field, "."), Value: typeErr.Value, Rule: "must be a " + typeErr.Type.String(), Fix: "write the value as a " + typeErr.Type.String()}
	case strings.Contains(msg, "unknown field"):
		fix = "remove or correct the key (keys are case-sensitive; see the upstream plugin's README for the field list)"
	}
	return &Error{Origin: origin, Field: ctx, Rule: msg, Fix: fix}
}

var resourceNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]*$`)
var prefixRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func validateName(origin, prefix, name string) error {
	if name == "" {
		return &Error{Origin: origin, Field: "resourceName", Rule: "is required", Fix: `set "resourceName", e.g. "sriov_rdma"; the NAD annotation k8s.v1.cni.cncf.io/resourceName and the pod's resource request must use the same prefix/name`}
	}
	if !resourceNameRe.MatchString(name) || len(name) > 63 {
		return &Error{Origin: origin, Field: "resourceName", Value: strconv.Quote(name), Rule: "must be 1-63 characters of letters, digits, '_', '-', '.', starting with a letter or digit", Fix: "rename the resource, e.g. sriov_rdma"}
	}
	if !prefixRe.MatchString(prefix) || len(prefix) > 253 {
		return &Error{Origin: origin, Field: "resourcePrefix", Value: strconv.Quote(prefix), Rule: "must be a DNS subdomain (lower case, dots)", Fix: "use a domain you own, e.g. example.com"}
	}
	return nil
}

func parseSriov(origin string, raw json.RawMessage) (Pool, error) {
	var w wireSriovResource
	if err := decodeStrict(raw, &w); err != nil {
		return Pool{}, jsonError(origin, "", err)
	}
	p := Pool{Kind: Exclusive, Prefix: w.ResourcePrefix, Name: w.ResourceName, Origin: origin}
	if p.Prefix == "" {
		p.Prefix = DefaultSriovPrefix
	}
	if err := validateName(origin, p.Prefix, p.Name); err != nil {
		return Pool{}, err
	}
	origin = fmt.Sprintf("%s (%s)", origin, p.Resource())
	p.Origin = origin
	if w.DeviceType != "" && w.DeviceType != "netDevice" {
		return Pool{}, &Error{Origin: origin, Field: "deviceType", Value: strconv.Quote(w.DeviceType), Rule: "rdmanet serves netDevice pools only (accelerator and auxNetDevice pools are not supported)", Fix: `remove "deviceType" or set it to "netDevice"`}
	}
	// selectors: an object (one group) or an ordered list of groups
	var groups []wireSriovSelector
	sel := bytes.TrimSpace(w.Selectors)
	switch {
	case len(sel) == 0 || string(sel) == "null":
		return Pool{}, &Error{Origin: origin, Field: "selectors", Rule: "is required: a pool without selectors would take every network function", Fix: `add selectors, e.g. {"vendors":["15b3"],"pfNames":["enp65s0f0np0"],"isRdma":true}`}
	case sel[0] == '[':
		if err := decodeStrict(sel, &groups); err != nil {
			return Pool{}, jsonError(origin, "selectors", err)
		}
	default:
		var g wireSriovSelector
		if err := decodeStrict(sel, &g); err != nil {
			return Pool{}, jsonError(origin, "selectors", err)
		}
		groups = []wireSriovSelector{g}
	}
	if len(groups) == 0 {
		return Pool{}, &Error{Origin: origin, Field: "selectors", Value: "[]", Rule: "is empty", Fix: "add at least one selector group"}
	}
	for i, g := range groups {
		field := fmt.Sprintf("selectors[%d]", i)
		if len(groups) == 1 && sel[0] == '{' {
			field = "selectors"
		}
		s, err := convertSriovSelector(origin, field, g)
		if err != nil {
			return Pool{}, err
		}
		p.Selectors = append(p.Selectors, s)
	}
	return p, nil
}

var hexIDRe = regexp.MustCompile(`^[0-9a-fA-F]{4}$`)
var bdfRe = regexp.MustCompile(`^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

func convertSriovSelector(origin, field string, g wireSriovSelector) (SriovSelector, error) {
	unsupported := func(name, why string) error {
		return &Error{Origin: origin, Field: field + "." + name, Rule: why, Fix: "remove " + name + " from the selector"}
	}
	switch {
	case g.NeedVhostNet:
		return SriovSelector{}, unsupported("needVhostNet", "vhost-net is for DPDK/VM workloads and is not supported by rdmanet's RDMA pools")
	case len(g.DDPProfiles) > 0:
		return SriovSelector{}, unsupported("ddpProfiles", "Intel DDP profiles are not supported")
	case g.VdpaType != "":
		return SriovSelector{}, unsupported("vdpaType", "vDPA devices are not supported")
	case len(g.AuxTypes) > 0:
		return SriovSelector{}, unsupported("auxTypes", "auxiliary network devices are not supported")
	case len(g.PKeys) > 0:
		return SriovSelector{}, unsupported("pKeys", "InfiniBand partition key selection is not supported yet")
	case len(g.ACPIIndexes) > 0:
		return SriovSelector{}, unsupported("acpiIndexes", "ACPI index selection is not supported")
	}
	s := SriovSelector{Drivers: g.Drivers, IsRdma: g.IsRdma}
	var err error
	if s.Vendors, err = hexIDs(origin, field+".vendors", g.Vendors); err != nil {
		return s, err
	}
	if s.Devices, err = hexIDs(origin, field+".devices", g.Devices); err != nil {
		return s, err
	}
	for _, a := range g.PCIAddresses {
		if !bdfRe.MatchString(a) {
			return s, &Error{Origin: origin, Field: field + ".pciAddresses", Value: strconv.Quote(a), Rule: "must be a full PCI address domain:bus:device.function", Fix: "write it as lspci -D prints it, e.g. 0000:41:00.2"}
		}
		s.PCIAddresses = append(s.PCIAddresses, strings.ToLower(a))
	}
	for _, a := range g.RootDevices {
		if !bdfRe.MatchString(a) {
			return s, &Error{Origin: origin, Field: field + ".rootDevices", Value: strconv.Quote(a), Rule: "must be the PF's full PCI address", Fix: "write it as lspci -D prints it, e.g. 0000:41:00.0"}
		}
		s.RootDevices = append(s.RootDevices, strings.ToLower(a))
	}
	for _, n := range g.PFNames {
		pf, err := ParsePFName(n)
		if err != nil {
			return s, &Error{Origin: origin, Field: field + ".pfNames", Value: strconv.Quote(n), Rule: err.Error(), Fix: `write "<pf netdev>" or "<pf netdev>#<first>-<last>,<n>", e.g. "ens1f0#0-3,7"`}
		}
		s.PFNames = append(s.PFNames, pf)
	}
	if s.LinkTypes, err = linkTypes(origin, field+".linkTypes", g.LinkTypes); err != nil {
		return s, err
	}
	return s, nil
}

// ParsePFName parses "ens1f0" or "ens1f0#0-3,7".
func ParsePFName(s string) (PFName, error) {
	name, ranges, has := strings.Cut(s, "#")
	if name == "" {
		return PFName{}, errors.New("the PF name is empty")
	}
	if !has {
		return PFName{Name: name}, nil
	}
	if ranges == "" {
		return PFName{}, errors.New("the VF list after '#' is empty")
	}
	seen := map[int]bool{}
	var vfs []int
	for _, part := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 {
			return PFName{}, fmt.Errorf("VF index %q is not a non-negative number", lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < 0 {
				return PFName{}, fmt.Errorf("VF index %q is not a non-negative number", hi)
			}
			if b < a {
				return PFName{}, fmt.Errorf("VF range %d-%d runs backwards", a, b)
			}
			if b > 1024 {
				return PFName{}, fmt.Errorf("VF index %d exceeds the SR-IOV limit", b)
			}
		}
		for i := a; i <= b; i++ {
			if !seen[i] {
				seen[i] = true
				vfs = append(vfs, i)
			}
		}
	}
	sort.Ints(vfs)
	return PFName{Name: name, VFs: vfs}, nil
}

func hexIDs(origin, field string, in []string) ([]string, error) {
	var out []string
	for _, v := range in {
		t := strings.TrimPrefix(strings.ToLower(v), "0x")
		if !hexIDRe.MatchString(t) {
			return nil, &Error{Origin: origin, Field: field, Value: strconv.Quote(v), Rule: "must be a 4-digit hexadecimal PCI ID", Fix: `use the ID lspci -nn shows, e.g. "15b3" (Mellanox) or "101e" (ConnectX VF)`}
		}
		out = append(out, t)
	}
	return out, nil
}

func linkTypes(origin, field string, in []string) ([]string, error) {
	var out []string
	for _, v := range in {
		switch strings.ToLower(v) {
		case "ether", "eth", "ethernet":
			out = append(out, LinkEther)
		case "infiniband", "ib":
			out = append(out, LinkInfiniBand)
		default:
			return nil, &Error{Origin: origin, Field: field, Value: strconv.Quote(v), Rule: `must be "ether" or "infiniband"`, Fix: `use "ether" for RoCE ports and "infiniband" for IB ports (ibstat shows the link layer)`}
		}
	}
	return out, nil
}

func parseShared(origin string, raw json.RawMessage) (Pool, error) {
	var w wireShared
	if err := decodeStrict(raw, &w); err != nil {
		return Pool{}, jsonError(origin, "", err)
	}
	p := Pool{Kind: Shared, Prefix: w.ResourcePrefix, Name: w.ResourceName, Origin: origin}
	if p.Prefix == "" {
		p.Prefix = DefaultSharedPrefix
	}
	if err := validateName(origin, p.Prefix, p.Name); err != nil {
		return Pool{}, err
	}
	origin = fmt.Sprintf("%s (%s)", origin, p.Resource())
	p.Origin = origin
	switch {
	case w.RdmaHcaMax == nil:
		return Pool{}, &Error{Origin: origin, Field: "rdmaHcaMax", Rule: "is required: it is how many pods may share the selected HCAs", Fix: `set "rdmaHcaMax", e.g. 63`}
	case *w.RdmaHcaMax < 1 || *w.RdmaHcaMax > 10000:
		return Pool{}, &Error{Origin: origin, Field: "rdmaHcaMax", Value: strconv.Itoa(*w.RdmaHcaMax), Rule: "must be between 1 and 10000", Fix: "choose the number of pods that may share the HCAs, e.g. 63"}
	}
	p.RdmaHcaMax = *w.RdmaHcaMax
	var sel wireSharedSelector
	if s := bytes.TrimSpace(w.Selectors); len(s) > 0 && string(s) != "null" {
		if s[0] == '[' {
			return Pool{}, &Error{Origin: origin, Field: "selectors", Rule: "must be an object in rdma-shared-dev-plugin configs", Fix: `write "selectors": {"ifNames": ["ens8f0np0"]}`}
		}
		if err := decodeStrict(s, &sel); err != nil {
			return Pool{}, jsonError(origin, "selectors", err)
		}
	}
	sel.IfNames = append(sel.IfNames, w.Devices...)
	var err error
	if p.Shared.Vendors, err = hexIDs(origin, "selectors.vendors", sel.Vendors); err != nil {
		return Pool{}, err
	}
	if p.Shared.DeviceIDs, err = hexIDs(origin, "selectors.deviceIDs", sel.DeviceIDs); err != nil {
		return Pool{}, err
	}
	if p.Shared.LinkTypes, err = linkTypes(origin, "selectors.linkTypes", sel.LinkTypes); err != nil {
		return Pool{}, err
	}
	p.Shared.Drivers, p.Shared.IfNames = sel.Drivers, sel.IfNames
	if len(p.Shared.Vendors)+len(p.Shared.DeviceIDs)+len(p.Shared.Drivers)+len(p.Shared.IfNames)+len(p.Shared.LinkTypes) == 0 {
		return Pool{}, &Error{Origin: origin, Field: "selectors", Rule: "selects nothing: a shared pool needs at least one of vendors, deviceIDs, drivers, ifNames, linkTypes", Fix: `add e.g. "selectors": {"ifNames": ["ens8f0np0"]}`}
	}
	return p, nil
}
