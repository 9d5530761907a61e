package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// wire formats -------------------------------------------------------------

// wireFile is both upstream files' top level. encoding/json matches its keys
// case-insensitively, as upstream's does.
type wireFile struct {
	ResourceList []wireSriovResource `json:"resourceList"`
	ConfigList   []wireShared        `json:"configList"`
	// rdma-shared-dev-plugin's refresh period in seconds (0: never)
	PeriodicUpdateInterval *int `json:"periodicUpdateInterval"`
}

var topKeys = []string{"resourceList", "configList", "periodicUpdateInterval"}

// wireSriovResource is one resourceList entry, as the SR-IOV Network Device
// Plugin (v3.11) declares it.
type wireSriovResource struct {
	ResourcePrefix  string                       `json:"resourcePrefix"`
	ResourceName    string                       `json:"resourceName"`
	DeviceType      string                       `json:"deviceType"`
	ExcludeTopology bool                         `json:"excludeTopology"`
	Selectors       *json.RawMessage             `json:"selectors"`
	AdditionalInfo  map[string]map[string]string `json:"additionalInfo"`
	// SelectorObjs is upstream's internal field, which its decoder also
	// fills from a "SelectorObjs" key: declared so that a wrong type there
	// is refused as upstream refuses it.
	SelectorObjs []any
}

var sriovResourceKeys = []string{"resourcePrefix", "resourceName", "deviceType", "excludeTopology", "selectors", "additionalInfo", "SelectorObjs"}

// wireSriovSelector is a selector group of a netDevice pool (or, for the
// keys they share, of an accelerator or auxNetDevice pool).
type wireSriovSelector struct {
	Vendors      []string `json:"vendors"`
	Devices      []string `json:"devices"`
	Drivers      []string `json:"drivers"`
	PCIAddresses []string `json:"pciAddresses"`
	PFNames      []string `json:"pfNames"`
	RootDevices  []string `json:"rootDevices"`
	LinkTypes    []string `json:"linkTypes"`
	IsRdma       bool     `json:"isRdma"`
	AcpiIndexes  []string `json:"acpiIndexes"`
	NeedVhostNet bool     `json:"needVhostNet"`
	DDPProfiles  []string `json:"ddpProfiles"`
	VdpaType     string   `json:"vdpaType"`
	PKeys        []string `json:"pKeys"`
	AuxTypes     []string `json:"auxTypes"`
}

// Selector keys by device type, as upstream declares them.
var (
	netDeviceSelectorKeys   = []string{"vendors", "devices", "drivers", "pciAddresses", "pfNames", "rootDevices", "linkTypes", "isRdma", "acpiIndexes", "needVhostNet", "ddpProfiles", "vdpaType", "pKeys"}
	acceleratorSelectorKeys = []string{"vendors", "devices", "drivers", "pciAddresses"}
	auxNetSelectorKeys      = []string{"vendors", "devices", "drivers", "pfNames", "rootDevices", "linkTypes", "isRdma", "acpiIndexes", "needVhostNet", "auxTypes"}
)

// Device types of the SR-IOV device plugin.
const (
	deviceNet    = "netDevice"
	deviceAccel  = "accelerator"
	deviceAuxNet = "auxNetDevice"
)

func parseJSON(f *File, origin string, data []byte) (entries int, otherKeys []string, err error) {
	var w wireFile
	if err := json.Unmarshal(data, &w); err != nil {
		return 0, nil, decodeError(origin, "", err, "")
	}
	checkKeys(&f.Warnings, origin, "", data, topKeys...)
	var top map[string]json.RawMessage
	_ = json.Unmarshal(data, &top)
	for k := range top {
		otherKeys = append(otherKeys, strconv.Quote(k))
	}
	var raw struct {
		ResourceList []json.RawMessage `json:"resourceList"`
		ConfigList   []json.RawMessage `json:"configList"`
	}
	_ = json.Unmarshal(data, &raw) // the typed decode above succeeded: the shapes are right
	if len(w.ResourceList) > 0 {
		if err := parseSriovList(f, origin, w.ResourceList, raw.ResourceList); err != nil {
			return 0, nil, err
		}
	}
	if len(w.ConfigList) > 0 {
		if err := parseSharedList(f, origin, w, raw.ConfigList); err != nil {
			return 0, nil, err
		}
	}
	return len(w.ResourceList) + len(w.ConfigList), otherKeys, nil
}

// Resource names. Upstream's own rules first, then kubelet's: a name upstream
// takes but kubelet refuses at registration would fail later anyway.
var (
	sriovNameRe   = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`) // SR-IOV device plugin (v3.7+)
	sharedNameRe  = regexp.MustCompile(`^[a-zA-Z0-9_]+$`)  // rdma-shared-dev-plugin
	kubeletNameRe = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	prefixRe      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

func validateName(origin, plugin string, upstream *regexp.Regexp, upstreamRule, prefix, name string) error {
	if name == "" {
		return &Error{Origin: origin, Field: "resourceName", Rule: "is required (" + plugin + " refuses an empty name)", Fix: `set "resourceName", e.g. "sriov_rdma"; the NAD annotation k8s.v1.cni.cncf.io/resourceName and the pod's resource request must use the same prefix/name`}
	}
	if !upstream.MatchString(name) {
		return &Error{Origin: origin, Field: "resourceName", Value: strconv.Quote(name), Rule: plugin + " refuses it: " + upstreamRule, Fix: "rename the resource, e.g. " + strconv.Quote(suggestName(name))}
	}
	if !kubeletNameRe.MatchString(name) || len(name) > 63 {
		return &Error{Origin: origin, Field: "resourceName", Value: strconv.Quote(name), Rule: plugin + " takes it, but kubelet refuses the device plugin's registration: the name part of an extended resource must be 1-63 characters and start and end with a letter or digit", Fix: "rename the resource, e.g. " + strconv.Quote(suggestName(name))}
	}
	if !prefixRe.MatchString(prefix) || len(prefix) > 253 {
		return &Error{Origin: origin, Field: "resourcePrefix", Value: strconv.Quote(prefix), Rule: plugin + " takes it, but kubelet refuses the registration: the prefix of an extended resource must be a DNS subdomain (lower case letters, digits, '-', '.')", Fix: "use a domain you own, e.g. example.com"}
	}
	if prefix == "kubernetes.io" || strings.HasSuffix(prefix, ".kubernetes.io") {
		return &Error{Origin: origin, Field: "resourcePrefix", Value: strconv.Quote(prefix), Rule: "kubelet refuses device plugins in the kubernetes.io domain (those names are Kubernetes' own resources)", Fix: "use a domain you own, e.g. example.com"}
	}
	return nil
}

func suggestName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.Trim(b.String(), "_")
	if s == "" {
		return "sriov_rdma"
	}
	if len(s) > 63 {
		s = strings.Trim(s[:63], "_")
	}
	return s
}

// sriovEntry is one resourceList entry while it is being read.
type sriovEntry struct {
	origin     string
	pool       Pool
	groups     []wireSriovSelector
	deviceType string
	skip       string // why rdmanet does not serve it ("" if it does)
	field      string // the field that made it skipped
}

func parseSriovList(f *File, origin string, list []wireSriovResource, raw []json.RawMessage) error {
	var kept []*sriovEntry
	for i, w := range list {
		e := &sriovEntry{origin: fmt.Sprintf("%s: resourceList[%d]", origin, i)}
		e.pool = Pool{Kind: Exclusive, Prefix: w.ResourcePrefix, Name: w.ResourceName}
		e.deviceType = w.DeviceType
		if e.pool.Prefix == "" {
			e.pool.Prefix = DefaultSriovPrefix
		}
		named := fmt.Sprintf("%s (%s)", e.origin, e.pool.Resource())
		if i < len(raw) {
			checkKeys(&f.Warnings, named, "", raw[i], sriovResourceKeys...)
		}
		// deviceType, exactly as upstream reads it (case-sensitive)
		switch w.DeviceType {
		case "", deviceNet:
		case deviceAccel, deviceAuxNet:
			e.skip, e.field = fmt.Sprintf("deviceType %q: rdmanet serves network functions with RDMA (netDevice pools) only", w.DeviceType), "deviceType"
		default:
			return &Error{Origin: named, Field: "deviceType", Value: strconv.Quote(w.DeviceType), Rule: `the SR-IOV device plugin refuses the file: deviceType must be "netDevice" (the default), "accelerator" or "auxNetDevice" (case-sensitive)`, Fix: `remove "deviceType" or set it to "netDevice"`}
		}
		if w.Selectors == nil || isNull(*w.Selectors) {
			return &Error{Origin: named, Field: "selectors", Rule: "is required: the SR-IOV device plugin crashes on a pool without selectors", Fix: `add selectors, e.g. {"vendors":["15b3"],"pfNames":["enp65s0f0np0"],"isRdma":true}`}
		}
		keys := netDeviceSelectorKeys
		switch w.DeviceType {
		case deviceAccel:
			keys = acceleratorSelectorKeys
		case deviceAuxNet:
			keys = auxNetSelectorKeys
		}
		groups, sel, err := decodeSelectors(*w.Selectors, keys)
		if err != nil {
			// upstream logs a warning and drops the pool; so does rdmanet
			f.dropped = append(f.dropped, named+": selectors: "+err.Error())
			f.Warnings = append(f.Warnings, Warning{Origin: named, Field: "selectors", Note: "pool dropped, as the SR-IOV device plugin drops it: " + err.Error(), Fix: `write "selectors" as an object of selector lists, or a non-empty list of such objects, e.g. {"vendors":["15b3"],"isRdma":true}`})
			continue
		}
		e.groups = groups
		for gi, g := range sel {
			if isNull(g) {
				return &Error{Origin: named, Field: fmt.Sprintf("selectors[%d]", gi), Value: "null", Rule: "the SR-IOV device plugin crashes on a null selector group", Fix: "remove the null from the list"}
			}
			checkKeys(&f.Warnings, named, groupField(sel, gi), g, keys...)
		}
		kept = append(kept, e)
	}
	// upstream validates every pool whose selectors decoded, in order,
	// before serving any: the first failure refuses the file
	seen := map[string]string{}
	for _, e := range kept {
		p := &e.pool
		if err := validateName(e.origin, "the SR-IOV device plugin", sriovNameRe, "only letters, digits, '_' and '-'", p.Prefix, p.Name); err != nil {
			return err
		}
		named := fmt.Sprintf("%s (%s)", e.origin, p.Resource())
		if prev, ok := seen[p.Resource()]; ok {
			return &Error{Origin: named, Field: "resourceName", Value: p.Resource(), Rule: "already defined by " + prev + " (the SR-IOV device plugin refuses duplicates)", Fix: "give each pool a distinct resourcePrefix/resourceName"}
		}
		seen[p.Resource()] = e.origin
		for gi, g := range e.groups {
			if g.IsRdma && g.VdpaType != "" {
				return &Error{Origin: named, Field: fmt.Sprintf("selectors[%d]", gi), Value: "isRdma and vdpaType", Rule: "the SR-IOV device plugin refuses both in one selector (mutually exclusive)", Fix: "remove vdpaType (rdmanet serves RDMA pools) or isRdma"}
			}
		}
		if e.deviceType == deviceAuxNet {
			for gi, g := range e.groups {
				if len(g.AuxTypes) == 0 {
					return &Error{Origin: named, Field: groupName(len(e.groups), gi) + ".auxTypes", Rule: "the SR-IOV device plugin refuses an auxNetDevice pool without auxTypes", Fix: `add "auxTypes": ["sf"]`}
				}
				for _, t := range g.AuxTypes {
					if t != "sf" {
						return &Error{Origin: named, Field: groupName(len(e.groups), gi) + ".auxTypes", Value: strconv.Quote(t), Rule: `the SR-IOV device plugin refuses it: "sf" is the only auxiliary device type it supports`, Fix: `write "auxTypes": ["sf"]`}
					}
				}
			}
		}
	}
	for _, e := range kept {
		p := e.pool
		named := fmt.Sprintf("%s (%s)", e.origin, p.Resource())
		p.Origin = named
		if e.skip == "" {
			e.skip, e.field = unservedSelector(e.groups)
		}
		if e.skip != "" {
			f.Skipped = append(f.Skipped, Skipped{Origin: e.origin, Resource: p.Resource(), Reason: e.skip})
			f.Warnings = append(f.Warnings, Warning{Origin: named, Field: e.field, Note: "pool skipped: " + e.skip, Fix: "serve this pool with the SR-IOV device plugin next to rdmanet, or remove it from rdmanet's configuration"})
			continue
		}
		for gi, g := range e.groups {
			s := convertSriovSelector(&f.Warnings, named, groupName(len(e.groups), gi), g)
			p.Selectors = append(p.Selectors, s)
		}
		f.Pools = append(f.Pools, p)
	}
	return nil
}

// decodeSelectors reads "selectors" as upstream does: an object (one group),
// else a non-empty list of objects.
func decodeSelectors(raw []byte, keys []string) ([]wireSriovSelector, []json.RawMessage, error) {
	// only the keys of the pool's device type are read: a wrong value under
	// another type's key is ignored, as upstream ignores it
	orig := raw
	raw = filterKeys(raw, keys)
	var one wireSriovSelector
	objErr := json.Unmarshal(raw, &one)
	if objErr == nil {
		return []wireSriovSelector{one}, []json.RawMessage{orig}, nil
	}
	var list []wireSriovSelector
	if err := json.Unmarshal(raw, &list); err != nil {
		if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
			return nil, nil, fmt.Errorf("cannot decode the selector list: %w", plainDecodeError(err))
		}
		return nil, nil, fmt.Errorf("cannot decode the selectors: %w", plainDecodeError(objErr))
	}
	if len(list) == 0 {
		return nil, nil, fmt.Errorf("the selector list is empty: at least one selector object is needed")
	}
	var rawList []json.RawMessage
	_ = json.Unmarshal(orig, &rawList)
	return list, rawList, nil
}

// filterKeys drops the keys of a JSON object (or of each object of a list)
// that do not fold-match keys.
func filterKeys(raw []byte, keys []string) []byte {
	keep := func(o map[string]json.RawMessage) map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		for k, v := range o {
			for _, kn := range keys {
				if strings.EqualFold(k, kn) {
					out[kn] = v // last spelling wins within a fold group, as in encoding/json
					break
				}
			}
		}
		return out
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err == nil && obj != nil {
		b, _ := json.Marshal(keep(obj))
		return b
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err == nil {
		for i, el := range list {
			var o map[string]json.RawMessage
			if err := json.Unmarshal(el, &o); err == nil && o != nil {
				list[i], _ = json.Marshal(keep(o))
			}
		}
		b, _ := json.Marshal(list)
		return b
	}
	return raw
}

func groupField(sel []json.RawMessage, i int) string {
	if len(sel) == 1 {
		// an object or a one-element list: name it by what the author wrote
		return "selectors"
	}
	return fmt.Sprintf("selectors[%d]", i)
}

func groupName(n, i int) string {
	if n == 1 {
		return "selectors"
	}
	return fmt.Sprintf("selectors[%d]", i)
}

// unservedSelector tells why rdmanet does not serve a netDevice pool with
// these selector groups, naming the field.
func unservedSelector(groups []wireSriovSelector) (string, string) {
	for gi, g := range groups {
		field := func(k string) string { return groupName(len(groups), gi) + "." + k }
		switch {
		case g.NeedVhostNet:
			return "needVhostNet: vhost-net is for DPDK and VM workloads; rdmanet serves RDMA pools", field("needVhostNet")
		case len(g.DDPProfiles) > 0:
			return "ddpProfiles: Intel DDP profile selection is not served by rdmanet", field("ddpProfiles")
		case g.VdpaType != "":
			return "vdpaType: vDPA devices are not served by rdmanet", field("vdpaType")
		case len(g.PKeys) > 0:
			return "pKeys: InfiniBand partition-key selection is not served by rdmanet yet", field("pKeys")
		case len(g.AcpiIndexes) > 0:
			return "acpiIndexes: ACPI-index selection is not served by rdmanet", field("acpiIndexes")
		}
		for _, r := range g.RootDevices {
			if strings.Contains(r, "#") {
				return fmt.Sprintf("rootDevices %q: VF ranges on rootDevices are not served by rdmanet (select the VFs with pfNames \"<pf>#<range>\" instead)", r), field("rootDevices")
			}
		}
	}
	return "", ""
}

var (
	hexIDRe = regexp.MustCompile(`^[0-9a-f]{4}$`)
	bdfRe   = regexp.MustCompile(`^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	anyBDF  = regexp.MustCompile(`^(?i)([0-9a-f]{4,}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
)

// convertSriovSelector keeps every value verbatim, as upstream compares it,
// warning about values that can never match.
func convertSriovSelector(w *[]Warning, origin, field string, g wireSriovSelector) SriovSelector {
	s := SriovSelector{Vendors: g.Vendors, Devices: g.Devices, Drivers: g.Drivers, PCIAddresses: g.PCIAddresses, LinkTypes: g.LinkTypes, IsRdma: g.IsRdma}
	idWarnings(w, origin, field+".vendors", g.Vendors, `e.g. "15b3" (Mellanox/NVIDIA)`)
	idWarnings(w, origin, field+".devices", g.Devices, `e.g. "101e" (ConnectX VF)`)
	for _, a := range g.PCIAddresses {
		if !bdfRe.MatchString(a) {
			*w = append(*w, Warning{Origin: origin, Field: field + ".pciAddresses", Value: strconv.Quote(a), Note: "never matches: sysfs names PCI functions domain:bus:device.function in lower case, and the address is compared verbatim", Fix: "write it as lspci -D prints it, e.g. " + strconv.Quote(fixBDF(a))})
		}
	}
	for _, a := range g.RootDevices {
		// upstream matches rootDevices case-insensitively
		s.RootDevices = append(s.RootDevices, strings.ToLower(a))
		if !bdfRe.MatchString(strings.ToLower(a)) {
			*w = append(*w, Warning{Origin: origin, Field: field + ".rootDevices", Value: strconv.Quote(a), Note: "never matches: a root device is the PF's full PCI address", Fix: "write it as lspci -D prints it, e.g. " + strconv.Quote(fixBDF(a))})
		}
	}
	firstFor := map[string]string{}
	for _, n := range g.PFNames {
		pf, problem := ParsePFName(n)
		if prev, dup := firstFor[strings.ToLower(pf.Name)]; dup {
			*w = append(*w, Warning{Origin: origin, Field: field + ".pfNames", Value: strconv.Quote(n), Note: fmt.Sprintf("ignored: %q names the same PF first, and the SR-IOV device plugin reads only the first entry of a PF", prev), Fix: "join the VF lists into one entry, e.g. \"ens1f0#0-3,7\""})
			continue
		}
		firstFor[strings.ToLower(pf.Name)] = n
		if problem != "" {
			*w = append(*w, Warning{Origin: origin, Field: field + ".pfNames", Value: strconv.Quote(n), Note: problem, Fix: `write "<pf netdev>" or "<pf netdev>#<first>-<last>,<n>", e.g. "ens1f0#0-3,7"`})
		}
		s.PFNames = append(s.PFNames, pf)
	}
	linkTypeWarnings(w, origin, field+".linkTypes", g.LinkTypes)
	return s
}

func fixBDF(a string) string {
	l := strings.ToLower(strings.TrimSpace(a))
	if anyBDF.MatchString(l) && len(l) == 7 {
		return "0000:" + l
	}
	if anyBDF.MatchString(l) {
		return l
	}
	return "0000:41:00.2"
}

func idWarnings(w *[]Warning, origin, field string, ids []string, example string) {
	for _, v := range ids {
		if hexIDRe.MatchString(v) {
			continue
		}
		fix := "use the 4 lower-case hex digits lspci -nn shows, " + example
		if t := strings.TrimPrefix(strings.ToLower(v), "0x"); hexIDRe.MatchString(t) {
			fix = fmt.Sprintf("write %q", t)
		}
		*w = append(*w, Warning{Origin: origin, Field: field, Value: strconv.Quote(v), Note: "never matches: sysfs shows PCI IDs as 4 lower-case hex digits without 0x, and upstream compares the string verbatim", Fix: fix})
	}
}

func linkTypeWarnings(w *[]Warning, origin, field string, in []string) {
	for _, v := range in {
		if v == LinkEther || v == LinkInfiniBand {
			continue
		}
		fix := `use "ether" for RoCE ports and "infiniband" for IB ports (ibstat shows the link layer)`
		switch strings.ToLower(v) {
		case "eth", "ethernet", "ether", "roce":
			fix = `write "ether"`
		case "ib", "infiniband":
			fix = `write "infiniband"`
		}
		*w = append(*w, Warning{Origin: origin, Field: field, Value: strconv.Quote(v), Note: `never matches an RDMA port: the link type is compared verbatim with the netdev's ("ether" or "infiniband")`, Fix: fix})
	}
}

// ParsePFName reads one pfNames entry, "ens1f0" or "ens1f0#0-3,7", the way
// the SR-IOV device plugin matches it: a VF is selected by the first list
// item that names it; reading stops at the first item upstream cannot read,
// so the VFs of later items are not selected. problem is "" when the entry
// reads cleanly, else what upstream does with it. A VF list that selects
// nothing is a non-nil empty VFs.
func ParsePFName(s string) (pf PFName, problem string) {
	fields := strings.Split(s, "#")
	pf.Name = fields[0]
	if len(fields) == 1 {
		if pf.Name == "" {
			return pf, "never matches: the PF name is empty"
		}
		return pf, ""
	}
	pf.VFs = []int{}
	if len(fields) != 2 {
		return pf, "selects no VF: the SR-IOV device plugin reads only one '#'"
	}
	if pf.Name == "" {
		problem = "never matches: the PF name is empty"
	}
	seen := map[int]bool{}
	add := func(lo, hi int) {
		if lo < 0 {
			lo = 0
		}
		if hi > maxVFIndex {
			hi = maxVFIndex
		}
		for i := lo; i <= hi; i++ {
			if !seen[i] {
				seen[i] = true
				pf.VFs = append(pf.VFs, i)
			}
		}
	}
	for _, item := range strings.Split(fields[1], ",") {
		if strings.Contains(item, "-") {
			rng := strings.Split(item, "-")
			if len(rng) != 2 {
				return pf.sorted(), fmt.Sprintf("VF range %q is not <first>-<last>: upstream stops reading the list there, so it and the items after it select no VF", item)
			}
			a, errA := strconv.Atoi(rng[0])
			b, errB := strconv.Atoi(rng[1])
			if errA != nil || errB != nil {
				return pf.sorted(), fmt.Sprintf("VF range %q is not two numbers: upstream stops reading the list there, so it and the items after it select no VF", item)
			}
			if b < a {
				problem = fmt.Sprintf("VF range %q runs backwards and selects no VF", item)
				continue
			}
			add(a, b)
			continue
		}
		n, err := strconv.Atoi(item)
		if err != nil {
			return pf.sorted(), fmt.Sprintf("VF index %q is not a number: upstream stops reading the list there, so it and the items after it select no VF", item)
		}
		add(n, n)
	}
	return pf.sorted(), problem
}

func (p PFName) sorted() PFName {
	sort.Ints(p.VFs)
	return p
}
