package config

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// wireShared is one configList entry, as rdma-shared-dev-plugin (v1.5)
// declares it.
type wireShared struct {
	ResourceName   string             `json:"resourceName"`
	ResourcePrefix string             `json:"resourcePrefix"`
	RdmaHcaMax     *int               `json:"rdmaHcaMax"`
	Devices        []string           `json:"devices"` // legacy: netdev names
	Selectors      wireSharedSelector `json:"selectors"`
}

var sharedKeys = []string{"resourceName", "resourcePrefix", "rdmaHcaMax", "devices", "selectors"}

type wireSharedSelector struct {
	Vendors   []string `json:"vendors"`
	DeviceIDs []string `json:"deviceIDs"`
	Drivers   []string `json:"drivers"`
	IfNames   []string `json:"ifNames"`
	LinkTypes []string `json:"linkTypes"`
}

var sharedSelectorKeys = []string{"vendors", "deviceIDs", "drivers", "ifNames", "linkTypes"}

func (s wireSharedSelector) empty() bool {
	return len(s.Vendors)+len(s.DeviceIDs)+len(s.Drivers)+len(s.IfNames)+len(s.LinkTypes) == 0
}

// parseSharedList reads configList as rdma-shared-dev-plugin's ReadConfig
// and ValidateConfigs do: the first invalid pool refuses the file.
func parseSharedList(f *File, origin string, w wireFile, raw []json.RawMessage) error {
	if w.PeriodicUpdateInterval != nil && *w.PeriodicUpdateInterval < 0 {
		return &Error{Origin: origin, Field: "periodicUpdateInterval", Value: strconv.Itoa(*w.PeriodicUpdateInterval), Rule: "rdma-shared-dev-plugin refuses a negative interval", Fix: "set seconds between rescans, or 0 for none (rdmanet rescans on its own schedule and ignores the value)"}
	}
	seen := map[string]string{}
	for i, c := range w.ConfigList {
		o := fmt.Sprintf("%s: configList[%d]", origin, i)
		p := Pool{Kind: Shared, Prefix: c.ResourcePrefix, Name: c.ResourceName}
		if p.Prefix == "" {
			p.Prefix = DefaultSharedPrefix
		}
		named := fmt.Sprintf("%s (%s)", o, p.Resource())
		p.Origin = named
		if i < len(raw) {
			checkKeys(&f.Warnings, named, "", raw[i], sharedKeys...)
			var sel struct {
				Selectors json.RawMessage `json:"selectors"`
			}
			if json.Unmarshal(raw[i], &sel) == nil && !isNull(sel.Selectors) {
				checkKeys(&f.Warnings, named, "selectors", sel.Selectors, sharedSelectorKeys...)
			}
		}
		if err := validateName(o, "rdma-shared-dev-plugin", sharedNameRe, "only letters, digits and '_'", p.Prefix, p.Name); err != nil {
			return err
		}
		// upstream keys uniqueness on the name alone: two pools of one name
		// would share one device plugin socket
		if prev, ok := seen[p.Name]; ok {
			return &Error{Origin: named, Field: "resourceName", Value: strconv.Quote(p.Name), Rule: "already used by " + prev + " (rdma-shared-dev-plugin refuses a repeated name even under another prefix)", Fix: "give each pool a distinct resourceName"}
		}
		seen[p.Name] = named
		switch {
		case c.RdmaHcaMax != nil && *c.RdmaHcaMax < 0:
			return &Error{Origin: named, Field: "rdmaHcaMax", Value: strconv.Itoa(*c.RdmaHcaMax), Rule: "rdma-shared-dev-plugin refuses a negative value", Fix: "choose the number of pods that may share the HCAs, e.g. 63"}
		case c.RdmaHcaMax == nil || *c.RdmaHcaMax == 0:
			v := "missing"
			if c.RdmaHcaMax != nil {
				v = "0"
			}
			return &Error{Origin: named, Field: "rdmaHcaMax", Value: v, Rule: "rdma-shared-dev-plugin takes it, but advertises a resource of zero slots, which no pod can ever be scheduled with", Fix: `set "rdmaHcaMax" to the number of pods that may share the selected HCAs, e.g. 63`}
		case *c.RdmaHcaMax > MaxRdmaHcaMax:
			return &Error{Origin: named, Field: "rdmaHcaMax", Value: strconv.Itoa(*c.RdmaHcaMax), Rule: fmt.Sprintf("rdmanet advertises one device per slot and serves at most %d slots per pool", MaxRdmaHcaMax), Fix: "choose the number of pods that may share the HCAs, e.g. 63"}
		}
		p.RdmaHcaMax = *c.RdmaHcaMax
		sel := c.Selectors
		switch {
		case sel.empty() && len(c.Devices) == 0:
			return &Error{Origin: named, Field: "selectors", Rule: "selects nothing: rdma-shared-dev-plugin refuses a pool with neither selectors nor devices", Fix: `add e.g. "selectors": {"ifNames": ["ens8f0np0"]}`}
		case !sel.empty() && len(c.Devices) > 0:
			return &Error{Origin: named, Field: "devices", Value: quoteList(c.Devices), Rule: `rdma-shared-dev-plugin refuses "devices" next to "selectors"`, Fix: `move the names into "selectors": {"ifNames": [...]} and remove "devices"`}
		case sel.empty():
			f.Warnings = append(f.Warnings, Warning{Origin: named, Field: "devices", Value: quoteList(c.Devices), Note: `read as "selectors": {"ifNames": [...]}; "devices" is deprecated upstream`, Fix: `write "selectors": {"ifNames": ` + quoteList(c.Devices) + `}`})
			sel.IfNames = c.Devices
		}
		idWarnings(&f.Warnings, named, "selectors.vendors", sel.Vendors, `e.g. "15b3" (Mellanox/NVIDIA)`)
		idWarnings(&f.Warnings, named, "selectors.deviceIDs", sel.DeviceIDs, `e.g. "1017" (ConnectX-5)`)
		linkTypeWarnings(&f.Warnings, named, "selectors.linkTypes", sel.LinkTypes)
		p.Shared = SharedSelector{Vendors: sel.Vendors, DeviceIDs: sel.DeviceIDs, Drivers: sel.Drivers, IfNames: sel.IfNames, LinkTypes: sel.LinkTypes}
		f.Pools = append(f.Pools, p)
	}
	return nil
}
