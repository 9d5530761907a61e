package upstreamconfigs

// The oracles: upstream's own parsers, run on a corpus entry, reduced to one
// comparable form.
//
//   - sriovdpReal: the SR-IOV Network Device Plugin module at
//     v0.0.0-20221127172732-a5a7395122e3 (v3.5.1 + 13 commits, Nov 2022), the
//     newest version of that module the Go module proxy serves (every tagged
//     v3.x and the newer pseudo-versions are refused; see README.md).
//     Decoding, selector decoding (factory.GetDeviceFilter), resource-name
//     validation (utils.ValidResourceName) and per-type validation
//     (DeviceProvider.ValidConfig) are upstream's code. Their order —
//     readConfig then validConfigs of cmd/sriovdp, package main, which no one
//     can import — is reproduced here, line for line in effect.
//   - sriovdpMirror: a mirror, written for this test, of what v3.11.0 (the
//     current release, which the proxy refuses) changed in that path: selector
//     lists, '-' in resource names, the auxNetDevice type, acpiIndexes and
//     pKeys. It is NOT upstream code. It is checked against sriovdpReal on
//     every corpus entry whose answer does not depend on those changes.
//   - sharedReal: rdma-shared-dev-plugin v1.5.3's ResourceManager.ReadConfig
//     and ValidateConfigs, run on the entry written to a temporary file; the
//     pools' values come from upstream's types.UserConfigList with the two
//     defaults ValidateConfigs applies (prefix "rdma"; devices become ifNames).
//   - multusReal: Multus v4.2.3's k8sclient.GetPodNetwork on a pod carrying
//     the annotation.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	sharedres "github.com/Mellanox/k8s-rdma-shared-dev-plugin/pkg/resources"
	sharedtypes "github.com/Mellanox/k8s-rdma-shared-dev-plugin/pkg/types"
	sriovfactory "github.com/k8snetworkplumbingwg/sriov-network-device-plugin/pkg/factory"
	sriovres "github.com/k8snetworkplumbingwg/sriov-network-device-plugin/pkg/resources"
	sriovtypes "github.com/k8snetworkplumbingwg/sriov-network-device-plugin/pkg/types"
	sriovutils "github.com/k8snetworkplumbingwg/sriov-network-device-plugin/pkg/utils"
	multus "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/k8sclient"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dpResult is a device plugin config's outcome in comparable form.
type dpResult struct {
	OK    bool
	Err   string
	Pools []dpPool // in file order
}

type dpPool struct {
	Resource   string
	Type       string // netDevice, accelerator, auxNetDevice, shared
	Groups     []dpGroup
	RdmaHcaMax int
	Shared     *dpShared
}

// dpGroup is one selector group's effective values: what it compares with
// what sysfs shows. PFNames is the selection upstream's real pfName selector
// makes over VFs 0..probeVFs-1 of each named PF: "name" (every VF) or
// "name#i,j" (those VFs; "name#" for none). RootDevices are lower-cased:
// upstream matches them case-insensitively against lower-case sysfs.
type dpGroup struct {
	Vendors, Devices, Drivers, PCIAddresses, RootDevices, LinkTypes, PFNames []string
	IsRdma                                                                   bool
	// Other: the selectors of kinds rdmanet does not serve, as key=value
	// (its pools are skipped, so only the oracles compare them).
	Other []string
}

func other(kv ...any) []string {
	var out []string
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		switch x := v.(type) {
		case []string:
			if len(x) == 0 {
				continue
			}
		case string:
			if x == "" {
				continue
			}
		case bool:
			if !x {
				continue
			}
		}
		out = append(out, fmt.Sprintf("%s=%v", kv[i], v))
	}
	return out
}

type dpShared struct {
	Vendors, DeviceIDs, Drivers, IfNames, LinkTypes []string
}

func refused(err any) dpResult { return dpResult{Err: fmt.Sprint(err)} }

// sriovdpReal runs the served SR-IOV device plugin module.
func sriovdpReal(data []byte) (res dpResult) {
	defer func() {
		if r := recover(); r != nil {
			res = refused(fmt.Sprintf("upstream panics: %v", r))
		}
	}()
	rf := sriovfactory.NewResourceFactory("intel.com", "sock", true)
	// readConfig
	var list sriovtypes.ResourceConfList
	if err := json.Unmarshal(data, &list); err != nil {
		return refused(err)
	}
	var kept []*sriovtypes.ResourceConfig
	for i := range list.ResourceList {
		conf := &list.ResourceList[i]
		if conf.DeviceType == "" {
			conf.DeviceType = sriovtypes.NetDeviceType
		} else if _, ok := sriovtypes.SupportedDevices[conf.DeviceType]; !ok {
			return refused(fmt.Sprintf("unsupported deviceType: %q", conf.DeviceType))
		}
		obj, err := rf.GetDeviceFilter(conf)
		if err != nil {
			continue // upstream: glog.Warningf, pool dropped
		}
		conf.SelectorObj = obj
		kept = append(kept, conf)
	}
	// main
	if len(kept) < 1 {
		return refused("no resource configuration; exiting")
	}
	// validConfigs
	names := map[string]bool{}
	for _, conf := range kept {
		if !sriovutils.ValidResourceName(conf.ResourceName) {
			return refused(fmt.Sprintf("resource name %q contains invalid characters", conf.ResourceName))
		}
		prefix := "intel.com"
		if conf.ResourcePrefix != "" {
			prefix = conf.ResourcePrefix
		}
		if names[prefix+"/"+conf.ResourceName] {
			return refused(fmt.Sprintf("resource name %q already exists", prefix+"/"+conf.ResourceName))
		}
		names[prefix+"/"+conf.ResourceName] = true
		if !rf.GetDeviceProvider(conf.DeviceType).ValidConfig(conf) {
			return refused("invalid configuration for " + conf.ResourceName)
		}
	}
	res.OK = true
	for _, conf := range kept {
		prefix := "intel.com"
		if conf.ResourcePrefix != "" {
			prefix = conf.ResourcePrefix
		}
		p := dpPool{Resource: prefix + "/" + conf.ResourceName, Type: string(conf.DeviceType)}
		switch s := conf.SelectorObj.(type) {
		case *sriovtypes.NetDeviceSelectors:
			p.Groups = []dpGroup{{Vendors: s.Vendors, Devices: s.Devices, Drivers: s.Drivers, PCIAddresses: s.PciAddresses, RootDevices: lower(s.RootDevices),
				LinkTypes: s.LinkTypes, PFNames: upstreamPFSelection(s.PfNames), IsRdma: s.IsRdma,
				Other: other("ddpProfiles", s.DDPProfiles, "vdpaType", string(s.VdpaType), "needVhostNet", s.NeedVhostNet)}}
		case *sriovtypes.AccelDeviceSelectors:
			p.Groups = []dpGroup{{Vendors: s.Vendors, Devices: s.Devices, Drivers: s.Drivers, PCIAddresses: s.PciAddresses}}
		}
		res.Pools = append(res.Pools, p)
	}
	return res
}

// probeVFs is how many VFs per PF the pfNames comparison probes.
const probeVFs = 64

// fakeVF is a VF as upstream's pfName selector sees it: only the methods
// the selector calls are implemented.
type fakeVF struct {
	sriovtypes.PciNetDevice
	pf string
	vf int
}

func (d fakeVF) GetPFName() string { return d.pf }
func (d fakeVF) GetVFID() int      { return d.vf }

// upstreamPFSelection runs upstream's own pfName selector over VFs
// 0..probeVFs-1 of every PF the entries name (the first spelling of each).
func upstreamPFSelection(pfNames []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, item := range pfNames {
		name := strings.Split(item, "#")[0]
		if seen[strings.ToLower(name)] || name == "" {
			continue
		}
		seen[strings.ToLower(name)] = true
		var devs []sriovtypes.PciDevice
		for i := 0; i < probeVFs; i++ {
			devs = append(devs, fakeVF{pf: name, vf: i})
		}
		var ids []int
		for _, d := range sriovres.NewPfNameSelector(pfNames).Filter(devs) {
			ids = append(ids, d.GetVFID())
		}
		out = append(out, pfSelection(name, ids))
	}
	return out
}

func pfSelection(name string, vfs []int) string {
	if len(vfs) == probeVFs {
		return name
	}
	sort.Ints(vfs)
	parts := make([]string, len(vfs))
	for i, v := range vfs {
		parts[i] = strconv.Itoa(v)
	}
	return name + "#" + strings.Join(parts, ",")
}

func lower(in []string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = strings.ToLower(s)
	}
	return out
}

// --- the v3.11.0 mirror (NOT upstream code; see the file comment) ---------

type mirrorResource struct {
	ResourcePrefix  string                       `json:"resourcePrefix,omitempty"`
	ResourceName    string                       `json:"resourceName"`
	DeviceType      string                       `json:"deviceType,omitempty"`
	ExcludeTopology bool                         `json:"excludeTopology,omitempty"`
	Selectors       *json.RawMessage             `json:"selectors,omitempty"`
	AdditionalInfo  map[string]map[string]string `json:"additionalInfo,omitempty"`
	SelectorObjs    []any
}

// mirrorSelectors holds the union of v3.11's NetDevice, Accel and AuxNet
// selector fields; mirrorKeys says which a device type reads.
type mirrorSelectors struct {
	Vendors      []string `json:"vendors,omitempty"`
	Devices      []string `json:"devices,omitempty"`
	Drivers      []string `json:"drivers,omitempty"`
	PciAddresses []string `json:"pciAddresses,omitempty"`
	PfNames      []string `json:"pfNames,omitempty"`
	RootDevices  []string `json:"rootDevices,omitempty"`
	LinkTypes    []string `json:"linkTypes,omitempty"`
	IsRdma       bool
	AcpiIndexes  []string `json:"acpiIndexes,omitempty"`
	NeedVhostNet bool     `json:"needVhostNet,omitempty"`
	DDPProfiles  []string `json:"ddpProfiles,omitempty"`
	VdpaType     string   `json:"vdpaType,omitempty"`
	PKeys        []string `json:"pKeys,omitempty"`
	AuxTypes     []string `json:"auxTypes,omitempty"`
}

var mirrorKeys = map[string][]string{
	"netDevice":    {"vendors", "devices", "drivers", "pciAddresses", "pfNames", "rootDevices", "linkTypes", "IsRdma", "acpiIndexes", "needVhostNet", "ddpProfiles", "vdpaType", "pKeys"},
	"accelerator":  {"vendors", "devices", "drivers", "pciAddresses"},
	"auxNetDevice": {"vendors", "devices", "drivers", "pfNames", "rootDevices", "linkTypes", "IsRdma", "acpiIndexes", "needVhostNet", "auxTypes"},
}

var mirrorNameRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// only keeps the keys a device type's selector struct declares (what
// encoding/json would read into that struct).
func only(raw json.RawMessage, keys []string) json.RawMessage {
	var o map[string]json.RawMessage
	if json.Unmarshal(raw, &o) != nil || o == nil {
		return raw
	}
	out := map[string]json.RawMessage{}
	for k, v := range o {
		for _, kn := range keys {
			if strings.EqualFold(k, kn) {
				out[k] = v
			}
		}
	}
	b, _ := json.Marshal(out)
	return b
}

func sriovdpMirror(data []byte) (res dpResult) {
	defer func() {
		if r := recover(); r != nil {
			res = refused(fmt.Sprintf("upstream panics: %v", r))
		}
	}()
	var list struct {
		ResourceList []mirrorResource `json:"resourceList"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return refused(err)
	}
	type kept struct {
		conf *mirrorResource
		sels []*mirrorSelectors
	}
	var ks []kept
	for i := range list.ResourceList {
		conf := &list.ResourceList[i]
		switch conf.DeviceType {
		case "":
			conf.DeviceType = "netDevice"
		case "netDevice", "accelerator", "auxNetDevice":
		default:
			return refused(fmt.Sprintf("unsupported deviceType: %q", conf.DeviceType))
		}
		raw := *conf.Selectors // nil: upstream panics
		keys := mirrorKeys[conf.DeviceType]
		one := make([]*mirrorSelectors, 1)
		if err := json.Unmarshal(only(raw, keys), &one[0]); err == nil {
			ks = append(ks, kept{conf, one})
			continue
		}
		var rawList []json.RawMessage
		if err := json.Unmarshal(raw, &rawList); err != nil || len(rawList) == 0 {
			continue // dropped with a warning
		}
		var sels []*mirrorSelectors
		bad := false
		for _, r := range rawList {
			var s *mirrorSelectors
			if err := json.Unmarshal(only(r, keys), &s); err != nil {
				bad = true
			}
			sels = append(sels, s)
		}
		if bad {
			continue
		}
		ks = append(ks, kept{conf, sels})
	}
	if len(ks) < 1 {
		return refused("no resource configuration; exiting")
	}
	names := map[string]bool{}
	for _, k := range ks {
		if !mirrorNameRe.MatchString(k.conf.ResourceName) {
			return refused(fmt.Sprintf("resource name %q contains invalid characters", k.conf.ResourceName))
		}
		prefix := "intel.com"
		if k.conf.ResourcePrefix != "" {
			prefix = k.conf.ResourcePrefix
		}
		if names[prefix+"/"+k.conf.ResourceName] {
			return refused("resource name already exists")
		}
		names[prefix+"/"+k.conf.ResourceName] = true
		for _, s := range k.sels {
			switch k.conf.DeviceType {
			case "netDevice":
				if s.IsRdma && s.VdpaType != "" { // nil s: upstream panics, as here
					return refused("VdpaType and IsRdma are mutually exclusive")
				}
			case "auxNetDevice":
				if len(s.AuxTypes) == 0 {
					return refused("AuxTypes are not specified")
				}
				for _, t := range s.AuxTypes {
					if t != "sf" {
						return refused(`only "sf" auxiliary device type supported`)
					}
				}
			}
		}
	}
	res.OK = true
	for _, k := range ks {
		prefix := "intel.com"
		if k.conf.ResourcePrefix != "" {
			prefix = k.conf.ResourcePrefix
		}
		p := dpPool{Resource: prefix + "/" + k.conf.ResourceName, Type: k.conf.DeviceType}
		for _, s := range k.sels {
			p.Groups = append(p.Groups, dpGroup{Vendors: s.Vendors, Devices: s.Devices, Drivers: s.Drivers, PCIAddresses: s.PciAddresses, RootDevices: lower(s.RootDevices),
				LinkTypes: s.LinkTypes, PFNames: upstreamPFSelection(s.PfNames), IsRdma: s.IsRdma,
				Other: other("ddpProfiles", s.DDPProfiles, "vdpaType", s.VdpaType, "needVhostNet", s.NeedVhostNet, "acpiIndexes", s.AcpiIndexes, "pKeys", s.PKeys, "auxTypes", s.AuxTypes)})
		}
		res.Pools = append(res.Pools, p)
	}
	return res
}

// sharedReal runs rdma-shared-dev-plugin's own config path.
func sharedReal(dir string, data []byte) (res dpResult) {
	defer func() {
		if r := recover(); r != nil {
			res = refused(fmt.Sprintf("upstream panics: %v", r))
		}
	}()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return refused(err)
	}
	rm := sharedres.NewResourceManager(path, false)
	if err := rm.ReadConfig(); err != nil {
		return refused(err)
	}
	if err := rm.ValidateConfigs(); err != nil {
		return refused(err)
	}
	var list sharedtypes.UserConfigList
	if err := json.Unmarshal(data, &list); err != nil {
		return refused(err)
	}
	res.OK = true
	for _, c := range list.ConfigList {
		if c.ResourcePrefix == "" {
			c.ResourcePrefix = "rdma"
		}
		sel := c.Selectors
		if len(sel.Vendors)+len(sel.DeviceIDs)+len(sel.Drivers)+len(sel.IfNames)+len(sel.LinkTypes) == 0 {
			sel.IfNames = c.Devices
		}
		res.Pools = append(res.Pools, dpPool{Resource: c.ResourcePrefix + "/" + c.ResourceName, Type: "shared", RdmaHcaMax: c.RdmaHcaMax,
			Shared: &dpShared{Vendors: sel.Vendors, DeviceIDs: sel.DeviceIDs, Drivers: sel.Drivers, IfNames: sel.IfNames, LinkTypes: sel.LinkTypes}})
	}
	return res
}

// netResult is a networks annotation's outcome in comparable form.
type netResult struct {
	OK       bool     `json:"ok"`
	Err      string   `json:"-"`
	Networks []string `json:"networks,omitempty"` // namespace/name@interface ("@" alone: no interface asked)
}

// multusReal runs Multus' own annotation parser.
func multusReal(value string) (res netResult) {
	defer func() {
		if r := recover(); r != nil {
			res = netResult{Err: fmt.Sprintf("Multus panics: %v", r)}
		}
	}()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "trainer-0", Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": value}}}
	nets, err := multus.GetPodNetwork(pod)
	if err != nil {
		if _, none := err.(*multus.NoK8sNetworkError); none {
			return netResult{OK: true}
		}
		return netResult{Err: err.Error()}
	}
	res.OK = true
	for _, n := range nets {
		res.Networks = append(res.Networks, n.Namespace+"/"+n.Name+"@"+n.InterfaceRequest)
	}
	return res
}
