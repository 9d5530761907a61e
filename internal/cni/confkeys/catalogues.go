package confkeys

// SRIOV is what rdmanet's sriov plugin reads: the upstream SR-IOV CNI
// schema (k8snetworkplumbingwg/sriov-cni, every release's NetConf).
var SRIOV = Catalogue{
	Plugin: "sriov",
	Known: []string{"deviceID", "mac", "vlan", "vlanQoS", "vlanProto", "spoofchk", "trust", "link_state",
		"min_tx_rate", "max_tx_rate", "mtu"},
	Ignored: map[string]string{
		"vlan_trunk": "VLAN trunks (an older upstream option for i40e VFs) are not implemented by rdmanet's sriov; the VF gets `vlan` only",
	},
	// upstream reads these too; the operator writes logLevel and logFile
	// into every NAD it renders, so they are accepted without a warning
	// (the PF comes from deviceID, logs go to the runtime's CNI log); the
	// rest are upstream's own cache fields
	Silent: []string{"master", "logLevel", "logFile", "OrigVfState", "VFID", "ContIFNames", "DPDKMode"},
	Hints: map[string]string{
		"vlan_id": "vlan", "vlanid": "vlan", "vlan-id": "vlan", "vlantag": "vlan", "vid": "vlan",
		"qos": "vlanQoS", "pcp": "vlanQoS", "priority": "vlanQoS",
		"proto": "vlanProto", "vlan_protocol": "vlanProto", "vlanprotocol": "vlanProto",
		"pciBusID": "deviceID", "pciAddress": "deviceID", "pci": "deviceID", "vf": "deviceID", "device": "deviceID",
		"macAddress": "mac", "mac_address": "mac", "hwaddr": "mac",
		"spoofcheck": "spoofchk", "spoof_check": "spoofchk",
		"minTxRate": "min_tx_rate", "maxTxRate": "max_tx_rate", "rate": "max_tx_rate", "max_rate": "max_tx_rate",
		"linkState": "link_state", "state": "link_state",
	},
}

// RDMA is what rdmanet's rdma plugin reads: the upstream RDMA CNI schema
// (k8snetworkplumbingwg/rdma-cni: deviceID and args.cni.debug).
var RDMA = Catalogue{
	Plugin: "rdma",
	Known:  []string{"deviceID"},
	Hints:  map[string]string{"pciBusID": "deviceID", "pciAddress": "deviceID", "debug": "args"},
}
