package confkeys

// IPoIB is what rdmanet's ipoib plugin reads: ipoib-cni's schema (master,
// ipam; mtu as its predecessor documents it), the deviceID rdmanet's meta
// plugin injects, and pkey as ib-sriov-cni users write it.
var IPoIB = Catalogue{
	Plugin: "ipoib",
	Known:  []string{"master", "mtu", "pkey", "deviceID"},
	Hints: map[string]string{
		"parent": "master", "link": "master", "netdev": "master", "ifname": "master", "pfName": "master",
		"partition": "pkey", "partitionKey": "pkey", "pkeys": "pkey", "p_key": "pkey",
		"pciBusID": "deviceID", "pciAddress": "deviceID",
	},
}
