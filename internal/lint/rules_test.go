package lint

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// ruleCase is one manifest set and whether it must trigger the rule.
type ruleCase struct {
	name    string
	rule    string
	trigger bool
	sev     Severity // expected severity when trigger (default: catalogue)
	docs    func() []M
}

func with(base func() wlB, mut func(*wlB)) wlB {
	w := base()
	mut(&w)
	return w
}

func ruleCases() []ruleCase {
	excl := func(mut func(*wlB)) func() []M {
		return func() []M { return exclusiveSet(with(exclusiveWL, mut)) }
	}
	shared := func(mut func(*wlB)) func() []M {
		return func() []M { return sharedSet(with(sharedWL, mut)) }
	}
	host := func(mut func(*wlB)) func() []M {
		return func() []M { return hostSet(with(hostWL, mut)) }
	}
	same := func(*wlB) {}
	nadWith := func(cfg M, resource string) func() []M {
		return func() []M { return []M{vfPool(), nadObj(trainNet, ns, resource, cfg), rdzv(), exclusiveWL().obj()} }
	}
	sharedNADWith := func(p M, resource string) func() []M {
		return func() []M {
			return []M{sharedPool(), nadObj("shared-rdma", ns, resource, conflist("shared-rdma", p)), rdzv(), sharedWL().obj()}
		}
	}
	return append(draRuleCases(), []ruleCase{
		// RDMA001
		{name: "malformed JSON annotation", rule: "RDMA001", trigger: true, docs: excl(func(w *wlB) { w.ann[manifest.NetworksAnnotation] = `[{"name": "train-rdma",}]` })},
		{name: "comma list with stray comma", rule: "RDMA001", trigger: true, docs: excl(func(w *wlB) { w.ann[manifest.NetworksAnnotation] = "train-rdma@net1," })},
		{name: "comma form parses", rule: "RDMA001", docs: excl(func(w *wlB) { w.ann[manifest.NetworksAnnotation] = "ai/train-rdma@net1" })},
		// RDMA002
		{name: "NAD config not JSON", rule: "RDMA002", trigger: true, docs: func() []M {
			n := exclusiveNAD()
			n["spec"] = M{"config": `{"cniVersion": "0.3.1", "plugins": [`}
			return []M{vfPool(), n}
		}},
		{name: "NAD plugin without type", rule: "RDMA002", trigger: true, docs: nadWith(conflist(trainNet, M{"vlan": 1}), vfRes)},
		{name: "empty config is info", rule: "RDMA002", trigger: true, sev: Info, docs: func() []M {
			n := exclusiveNAD()
			n["spec"] = M{}
			return []M{vfPool(), n}
		}},
		{name: "valid conflist", rule: "RDMA002", docs: excl(same)},
		// RDMA003
		{name: "pool without resourceName", rule: "RDMA003", trigger: true, docs: func() []M {
			return []M{configMap("sriovdp-config", "kube-system", M{"resourceList": []any{M{"selectors": []any{M{"pfNames": []string{vfPF}}}}}})}
		}},
		{name: "pool without selectors", rule: "RDMA003", trigger: true, docs: func() []M {
			return []M{configMap("sriovdp-config", "kube-system", M{"resourceList": []any{M{"resourceName": "x"}}})}
		}},
		{name: "shared pool rdmaHcaMax 0", rule: "RDMA003", trigger: true, docs: func() []M { return []M{sharedPoolCM("hca", []string{sharedPF}, 0)} }},
		{name: "pool config not JSON", rule: "RDMA003", trigger: true, docs: func() []M {
			return []M{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": M{"name": "x"}, "data": M{"config.json": `{"resourceList": [}`}}}
		}},
		{name: "valid pools", rule: "RDMA003", docs: func() []M { return []M{vfPool(), sharedPool()} }},
		// RDMA010
		{name: "pod requests another pool than the NAD", rule: "RDMA010", trigger: true, docs: func() []M {
			p2 := sriovPoolCM("example.com", "other", []string{"ens9f0np0"}, true)
			p2["metadata"] = M{"name": "p2", "namespace": "kube-system"}
			return []M{vfPool(), p2, exclusiveNAD(), rdzv(), with(exclusiveWL, func(w *wlB) {
				w.c().limits = M{"example.com/other": "1"}
				w.c().requests = nil
			}).obj()}
		}},
		{name: "three names match", rule: "RDMA010", docs: excl(same)},
		// RDMA011
		{name: "NAD resourceName has no pool", rule: "RDMA011", trigger: true, docs: nadWith(conflist(trainNet, sriovPlugin(), M{"type": "rdma"}), "example.com/sriov_rdma_typo")},
		{name: "NAD resourceName has a pool", rule: "RDMA011", docs: excl(same)},
		// RDMA012
		{name: "pod resource has no pool", rule: "RDMA012", trigger: true, docs: excl(func(w *wlB) {
			w.c().limits = M{"example.com/sriov-rdma": "1"}
			w.c().requests = nil
		})},
		{name: "pod resource has a pool", rule: "RDMA012", docs: excl(same)},
		// RDMA013
		{name: "VF requested without annotation", rule: "RDMA013", trigger: true, docs: excl(func(w *wlB) { w.ann = nil })},
		{name: "shared slot without network is a warning", rule: "RDMA013", trigger: true, sev: Warning, docs: shared(func(w *wlB) { w.ann = nil })},
		{name: "VF with annotation", rule: "RDMA013", docs: excl(same)},
		// RDMA014
		{name: "annotation without resource", rule: "RDMA014", trigger: true, docs: excl(func(w *wlB) {
			w.c().limits = M{"nvidia.com/gpu": "8"}
			w.c().requests = nil
		})},
		{name: "annotation with resource", rule: "RDMA014", docs: excl(same)},
		// RDMA015
		{name: "requests differ from limits", rule: "RDMA015", trigger: true, docs: excl(func(w *wlB) { w.c().requests = M{"nvidia.com/gpu": "8", vfRes: "2"} })},
		{name: "request without limit", rule: "RDMA015", trigger: true, docs: excl(func(w *wlB) {
			w.c().limits = M{"nvidia.com/gpu": "8"}
			w.c().requests = M{vfRes: "1"}
		})},
		{name: "fractional device", rule: "RDMA015", trigger: true, docs: excl(func(w *wlB) {
			w.c().limits = M{"nvidia.com/gpu": "8", vfRes: "500m"}
			w.c().requests = nil
		})},
		{name: "limits only", rule: "RDMA015", docs: excl(func(w *wlB) { w.c().requests = nil })},
		// RDMA016
		{name: "two attachments, one VF", rule: "RDMA016", trigger: true, docs: excl(func(w *wlB) {
			w.ann[manifest.NetworksAnnotation] = "train-rdma@net1,train-rdma@net2"
		})},
		{name: "one attachment, two VFs", rule: "RDMA016", trigger: true, sev: Warning, docs: excl(func(w *wlB) {
			w.c().limits = M{"nvidia.com/gpu": "8", vfRes: "2"}
			w.c().requests = nil
		})},
		{name: "two attachments, two VFs", rule: "RDMA016", docs: excl(func(w *wlB) {
			w.ann[manifest.NetworksAnnotation] = "train-rdma@net1,train-rdma@net2"
			w.c().limits = M{"nvidia.com/gpu": "8", vfRes: "2"}
			w.c().requests = nil
		})},
		// RDMA020
		{name: "NAD absent while others present", rule: "RDMA020", trigger: true, docs: excl(func(w *wlB) { w.ann[manifest.NetworksAnnotation] = "train-rdma-v2@net1" })},
		{name: "no network definitions in input is info", rule: "RDMA020", trigger: true, sev: Info, docs: func() []M { return []M{vfPool(), exclusiveWL().obj()} }},
		{name: "NAD present", rule: "RDMA020", docs: excl(same)},
		// RDMA021
		{name: "NAD in another namespace", rule: "RDMA021", trigger: true, docs: func() []M {
			n := exclusiveNAD()
			n["metadata"].(M)["namespace"] = "kube-system"
			return []M{vfPool(), n, rdzv(), exclusiveWL().obj()}
		}},
		{name: "namespace-qualified reference", rule: "RDMA021", docs: func() []M {
			n := exclusiveNAD()
			n["metadata"].(M)["namespace"] = "kube-system"
			return []M{vfPool(), n, rdzv(), with(exclusiveWL, func(w *wlB) { w.ann[manifest.NetworksAnnotation] = "kube-system/train-rdma@net1" }).obj()}
		}},
		// RDMA022
		{name: "hostNetwork with annotation", rule: "RDMA022", trigger: true, docs: host(func(w *wlB) { w.ann[manifest.NetworksAnnotation] = "shared-rdma@net1" })},
		{name: "hostNetwork without annotation", rule: "RDMA022", docs: host(same)},
		// RDMA030
		{name: "static deviceID", rule: "RDMA030", trigger: true, docs: nadWith(conflist(trainNet, M{"type": "sriov", "deviceID": "0000:65:00.2", "ipam": rdmanetIPAM()}, M{"type": "rdma"}), vfRes)},
		{name: "deviceID injected", rule: "RDMA030", docs: excl(same)},
		// RDMA031
		{name: "sriov NAD without resourceName", rule: "RDMA031", trigger: true, docs: nadWith(conflist(trainNet, sriovPlugin(), M{"type": "rdma"}), "")},
		{name: "SpiderMultusConfig sriov without resourceName", rule: "RDMA031", trigger: true, docs: func() []M {
			return []M{{"apiVersion": "spiderpool.spidernet.io/v2beta1", "kind": "SpiderMultusConfig", "metadata": M{"name": "s", "namespace": ns}, "spec": M{"cniType": "sriov", "enableRdma": true}}}
		}},
		{name: "sriov NAD with resourceName", rule: "RDMA031", docs: excl(same)},
		// RDMA032
		{name: "rdma before sriov", rule: "RDMA032", trigger: true, docs: nadWith(conflist(trainNet, M{"type": "rdma"}, sriovPlugin()), vfRes)},
		{name: "rdma on macvlan", rule: "RDMA032", trigger: true, docs: func() []M {
			return []M{sharedPool(), nadObj("shared-rdma", ns, sharedRes, conflist("shared-rdma", macvlanPlugin(sharedPF), M{"type": "rdma"}))}
		}},
		{name: "sriov then rdma", rule: "RDMA032", docs: excl(same)},
		// RDMA033
		{name: "sriov only on an isRdma pool", rule: "RDMA033", trigger: true, docs: nadWith(conflist(trainNet, sriovPlugin()), vfRes)},
		{name: "sriov only, pool unknown", rule: "RDMA033", trigger: true, sev: Warning, docs: func() []M {
			return []M{nadObj(trainNet, ns, vfRes, conflist(trainNet, sriovPlugin()))}
		}},
		{name: "sriov + rdma", rule: "RDMA033", docs: excl(same)},
		// RDMA034
		{name: "sriov NAD over shared pool", rule: "RDMA034", trigger: true, docs: func() []M {
			return []M{sharedPool(), nadObj(trainNet, ns, sharedRes, conflist(trainNet, sriovPlugin(), M{"type": "rdma"}))}
		}},
		{name: "macvlan NAD over VF pool", rule: "RDMA034", trigger: true, docs: func() []M {
			return []M{vfPool(), nadObj("shared-rdma", ns, vfRes, conflist("shared-rdma", macvlanPlugin(vfPF)))}
		}},
		{name: "macvlan NAD over shared pool", rule: "RDMA034", docs: shared(same)},
		// RDMA035
		{name: "ipam default route", rule: "RDMA035", trigger: true, docs: nadWith(conflist(trainNet, M{"type": "sriov", "ipam": M{"type": "rdmanet-ipam", "range": "10.60.0.0/16", "routes": []any{M{"dst": "0.0.0.0/0"}}}}, M{"type": "rdma"}), vfRes)},
		{name: "ipam subnet route only", rule: "RDMA035", docs: nadWith(conflist(trainNet, M{"type": "sriov", "ipam": M{"type": "rdmanet-ipam", "range": "10.60.0.0/16", "routes": []any{M{"dst": "10.61.0.0/16"}}}}, M{"type": "rdma"}), vfRes)},
		// RDMA036
		{name: "sriov without ipam", rule: "RDMA036", trigger: true, docs: nadWith(conflist(trainNet, M{"type": "sriov"}, M{"type": "rdma"}), vfRes)},
		{name: "sriov with ipam", rule: "RDMA036", docs: excl(same)},
		// RDMA037
		{name: "host-local ipam", rule: "RDMA037", trigger: true, docs: nadWith(conflist(trainNet, M{"type": "sriov", "ipam": M{"type": "host-local", "subnet": "10.60.0.0/16"}}, M{"type": "rdma"}), vfRes)},
		{name: "whereabouts ipam", rule: "RDMA037", docs: nadWith(conflist(trainNet, M{"type": "sriov", "ipam": M{"type": "whereabouts", "range": "10.60.0.0/16"}}, M{"type": "rdma"}), vfRes)},
		// RDMA038
		{name: "macvlan on ib0", rule: "RDMA038", trigger: true, docs: func() []M {
			return []M{nadObj("ibnet", ns, "", conflist("ibnet", macvlanPlugin("ib0")))}
		}},
		{name: "MacvlanNetwork on an IB pool interface", rule: "RDMA038", trigger: true, docs: func() []M {
			p := configMap("rdma-devices", "kube-system", M{"configList": []any{M{"resourceName": "hca_ib", "rdmaHcaMax": 8, "selectors": M{"ifNames": []string{"ens3f0"}, "linkTypes": []string{"infiniband"}}}}})
			return []M{p, {"apiVersion": "mellanox.com/v1alpha1", "kind": "MacvlanNetwork", "metadata": M{"name": "m"}, "spec": M{"master": "ens3f0", "mtu": 9000, "ipam": `{"type":"whereabouts","range":"192.168.2.0/24"}`}}}
		}},
		{name: "sriov on IB VF pool", rule: "RDMA038", trigger: true, docs: func() []M {
			p := configMap("sriovdp-config", "kube-system", M{"resourceList": []any{M{"resourcePrefix": "example.com", "resourceName": "sriov_rdma", "selectors": []any{M{"pfNames": []string{vfPF}, "isRdma": true, "linkTypes": []string{"infiniband"}}}}}})
			return []M{p, exclusiveNAD()}
		}},
		{name: "macvlan on RoCE PF", rule: "RDMA038", docs: shared(same)},
		// RDMA100, RDMA101 (ipoib; more cases in TestIPoIBRules)
		{name: "ipoib on an Ethernet pool interface", rule: "RDMA100", trigger: true, docs: func() []M {
			p := configMap("rdma-devices", "kube-system", M{"configList": []any{M{"resourceName": "hca_ib", "rdmaHcaMax": 8, "selectors": M{"ifNames": []string{"ens3f0"}, "linkTypes": []string{"ether"}}}}})
			return []M{p, nadObj("ibnet", ns, "", M{"cniVersion": "0.3.1", "name": "ibnet", "type": "ipoib", "master": "ens3f0", "ipam": M{}})}
		}},
		{name: "ipoib on the IB pool interface", rule: "RDMA100", docs: func() []M {
			p := configMap("rdma-devices", "kube-system", M{"configList": []any{M{"resourceName": "hca_ib", "rdmaHcaMax": 8, "selectors": M{"ifNames": []string{"ib0"}, "linkTypes": []string{"infiniband"}}}}})
			return []M{p, nadObj("ibnet", ns, "", M{"cniVersion": "0.3.1", "name": "ibnet", "type": "ipoib", "master": "ib0", "ipam": M{}})}
		}},
		{name: "ipoib without master or resource", rule: "RDMA101", trigger: true, docs: func() []M {
			return []M{nadObj("ibnet", ns, "", M{"cniVersion": "0.3.1", "name": "ibnet", "type": "ipoib", "ipam": M{}})}
		}},
		{name: "ipoib with master", rule: "RDMA101", docs: func() []M {
			return []M{nadObj("ibnet", ns, "", M{"cniVersion": "0.3.1", "name": "ibnet", "type": "ipoib", "master": "ib0", "ipam": M{}})}
		}},
		// RDMA039
		{name: "macvlan master not the pool interface", rule: "RDMA039", trigger: true, docs: sharedNADWith(macvlanPlugin("ens7f0np0"), sharedRes)},
		{name: "macvlan master is the pool interface", rule: "RDMA039", docs: shared(same)},
		// RDMA040
		{name: "macvlan mtu 1500", rule: "RDMA040", trigger: true, docs: sharedNADWith(M{"type": "macvlan", "master": sharedPF, "mtu": 1500, "ipam": rdmanetIPAM()}, sharedRes)},
		{name: "MacvlanNetwork without mtu", rule: "RDMA040", trigger: true, docs: func() []M {
			return []M{{"apiVersion": "mellanox.com/v1alpha1", "kind": "MacvlanNetwork", "metadata": M{"name": "m"}, "spec": M{"master": sharedPF, "ipam": `{"type":"whereabouts","range":"192.168.2.0/24"}`}}}
		}},
		{name: "macvlan mtu 9000", rule: "RDMA040", docs: shared(same)},
		// RDMA041
		{name: "two rails in one subnet", rule: "RDMA041", trigger: true, docs: func() []M {
			n2 := nadObj("train-rdma-2", ns, vfRes, conflist("train-rdma-2", sriovPlugin(), M{"type": "rdma"}))
			return []M{vfPool(), exclusiveNAD(), n2, rdzv(), with(exclusiveWL, func(w *wlB) {
				w.ann[manifest.NetworksAnnotation] = "train-rdma@net1,train-rdma-2@net2"
				w.c().limits = M{vfRes: "2"}
				w.c().requests = nil
			}).obj()}
		}},
		{name: "two rails in two subnets", rule: "RDMA041", docs: func() []M {
			n2 := nadObj("train-rdma-2", ns, vfRes, conflist("train-rdma-2", M{"type": "sriov", "ipam": M{"type": "rdmanet-ipam", "range": "10.61.0.0/16"}}, M{"type": "rdma"}))
			return []M{vfPool(), exclusiveNAD(), n2, rdzv(), with(exclusiveWL, func(w *wlB) {
				w.ann[manifest.NetworksAnnotation] = "train-rdma@net1,train-rdma-2@net2"
				w.c().limits = M{vfRes: "2"}
				w.c().requests = nil
			}).obj()}
		}},
		// RDMA042
		// A gateway outside the range alone is accepted, as Whereabouts accepts it (issue 27); a route through it fails ADD.
		{name: "gateway outside the range with a route through it", rule: "RDMA042", trigger: true, docs: nadWith(conflist(trainNet, M{"type": "sriov", "ipam": M{"type": "rdmanet-ipam", "range": "10.60.0.0/16", "gateway": "10.70.0.1", "routes": []any{M{"dst": "10.61.0.0/16"}}}}, M{"type": "rdma"}), vfRes)},
		{name: "whereabouts range not a CIDR", rule: "RDMA042", trigger: true, docs: nadWith(conflist(trainNet, M{"type": "sriov", "ipam": M{"type": "whereabouts", "range": "10.60.0.0"}}, M{"type": "rdma"}), vfRes)},
		{name: "seed whereabouts config", rule: "RDMA042", docs: nadWith(conflist(trainNet, M{"type": "sriov", "ipam": M{"type": "whereabouts", "range": "10.60.0.0/16", "exclude": []string{"10.60.0.0/24"}}}, M{"type": "rdma"}), vfRes)},
		{name: "kubernetes datastore without kubeconfig (node config supplies it)", rule: "RDMA042", docs: nadWith(conflist(trainNet, M{"type": "sriov", "ipam": M{"type": "whereabouts", "range": "10.60.0.0/16", "datastore": "kubernetes"}}, M{"type": "rdma"}), vfRes)},
		// RDMA029 (more in rules_cni_keys_test.go)
		{name: "sriov vlan_id", rule: "RDMA029", trigger: true, docs: nadWith(conflist(trainNet, M{"type": "sriov", "vlan_id": 200, "ipam": M{"type": "whereabouts", "range": "10.60.0.0/16"}}, M{"type": "rdma"}), vfRes)},
		{name: "sriov and rdma with upstream keys only", rule: "RDMA029", docs: nadWith(conflist(trainNet, M{"type": "sriov", "vlan": 200, "spoofchk": "on", "logLevel": "info", "ipam": M{"type": "whereabouts", "range": "10.60.0.0/16"}}, M{"type": "rdma", "args": M{"cni": M{"debug": true}}}), vfRes)},
		// RDMA044 (more in rules_ipam_keys_test.go)
		{name: "misspelled ipam key", rule: "RDMA044", trigger: true, docs: nadWith(conflist(trainNet, M{"type": "sriov", "ipam": M{"type": "whereabouts", "range": "10.60.0.0/16", "rangeStart": "10.60.1.0"}}, M{"type": "rdma"}), vfRes)},
		{name: "every whereabouts key", rule: "RDMA044", docs: nadWith(conflist(trainNet, M{"type": "sriov", "ipam": M{"type": "whereabouts", "range": "10.60.0.0/16", "range_start": "10.60.1.0", "enable_overlapping_ranges": true, "log_file": "/tmp/w.log", "leader_lease_duration": 1500}}, M{"type": "rdma"}), vfRes)},
		// RDMA043
		{name: "VF network and macvlan network in one input", rule: "RDMA043", trigger: true, docs: func() []M {
			return []M{vfPool(), sharedPool(), exclusiveNAD(), sharedNAD()}
		}},
		{name: "only the VF network", rule: "RDMA043", docs: func() []M { return []M{vfPool(), sharedPool(), exclusiveNAD()} }},
		// RDMA045
		{name: "VF pool and shared pool on one PF", rule: "RDMA045", trigger: true, docs: func() []M {
			return []M{vfPool(), sharedPoolCM("hca_shared", []string{vfPF}, 63)}
		}},
		{name: "NicClusterPolicy shared pool by vendor only", rule: "RDMA045", trigger: true, sev: Warning, docs: func() []M {
			ncp := M{"apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy", "metadata": M{"name": "nic-cluster-policy"},
				"spec": M{"rdmaSharedDevicePlugin": M{"config": `{"configList":[{"resourceName":"hca_shared","rdmaHcaMax":63,"selectors":{"vendors":["15b3"],"deviceIDs":["1017"]}}]}`}}}
			return []M{vfPool(), ncp}
		}},
		{name: "disjoint PFs", rule: "RDMA045", docs: func() []M { return []M{vfPool(), sharedPool()} }},
		// RDMA046
		{name: "rdma chain over non-RDMA VF pool", rule: "RDMA046", trigger: true, docs: func() []M {
			return []M{sriovPoolCM("example.com", "sriov_rdma", []string{vfPF}, false), exclusiveNAD()}
		}},
		{name: "rdma chain over isRdma pool", rule: "RDMA046", docs: excl(same)},
		// RDMA050
		{name: "hostNetwork without dnsPolicy", rule: "RDMA050", trigger: true, docs: host(func(w *wlB) { w.dnsPolicy = "" })},
		{name: "hostNetwork with ClusterFirst", rule: "RDMA050", trigger: true, docs: host(func(w *wlB) { w.dnsPolicy = "ClusterFirst" })},
		{name: "hostNetwork with ClusterFirstWithHostNet", rule: "RDMA050", docs: host(same)},
		// RDMA051
		{name: "hostNetwork fixed port", rule: "RDMA051", trigger: true, docs: host(func(w *wlB) { w.ann = nil })},
		{name: "hostNetwork fixed port on whole nodes is info", rule: "RDMA051", trigger: true, sev: Info, docs: host(same)},
		{name: "own netns fixed port", rule: "RDMA051", docs: excl(same)},
		// RDMA052
		{name: "host mode without device", rule: "RDMA052", trigger: true, docs: host(func(w *wlB) { w.c().limits = M{"nvidia.com/gpu": "8"} })},
		{name: "host mode with shared slot", rule: "RDMA052", docs: host(same)},
		// RDMA053
		{name: "host mode with VF resource", rule: "RDMA053", trigger: true, docs: func() []M {
			return []M{vfPool(), rdzv(), with(hostWL, func(w *wlB) { w.c().limits = M{"nvidia.com/gpu": "8", vfRes: "1"} }).obj()}
		}},
		{name: "host mode with shared resource", rule: "RDMA053", docs: host(same)},
		// RDMA060
		{name: "exclusive without IPC_LOCK", rule: "RDMA060", trigger: true, docs: excl(func(w *wlB) { w.c().caps = nil })},
		{name: "host without IPC_LOCK", rule: "RDMA060", trigger: true, docs: host(func(w *wlB) { w.c().caps = []string{"NET_ADMIN"} })},
		{name: "CAP_IPC_LOCK spelling", rule: "RDMA060", docs: excl(func(w *wlB) { w.c().caps = []string{"CAP_IPC_LOCK"} })},
		{name: "tcp pod needs no IPC_LOCK", rule: "RDMA060", docs: func() []M {
			return []M{with(exclusiveWL, func(w *wlB) {
				w.ann = nil
				w.c().caps = nil
				w.c().limits = M{"nvidia.com/gpu": "8"}
				w.c().requests = nil
				w.c().env = nil
			}).obj()}
		}},
		// RDMA061
		{name: "privileged RDMA container", rule: "RDMA061", trigger: true, docs: excl(func(w *wlB) { w.c().privileged = true })},
		{name: "capability instead", rule: "RDMA061", docs: excl(same)},
		// RDMA062
		{name: "non-root RDMA container", rule: "RDMA062", trigger: true, docs: excl(func(w *wlB) { w.c().runAsUser = i64(1000) })},
		{name: "root RDMA container", rule: "RDMA062", docs: excl(func(w *wlB) { w.c().runAsUser = i64(0) })},
		// RDMA070
		{name: "GID index hard-coded", rule: "RDMA070", trigger: true, docs: excl(func(w *wlB) { w.c().setEnv("NCCL_IB_GID_INDEX", "3") })},
		{name: "GID index on InfiniBand is info", rule: "RDMA070", trigger: true, sev: Info, docs: func() []M {
			p := configMap("sriovdp-config", "kube-system", M{"resourceList": []any{M{"resourcePrefix": "example.com", "resourceName": "sriov_rdma", "selectors": []any{M{"pfNames": []string{vfPF}, "isRdma": true, "linkTypes": []string{"IB"}}}}}})
			n := nadObj(trainNet, ns, vfRes, conflist(trainNet, M{"type": "ib-sriov", "rdmaIsolation": true, "ipam": rdmanetIPAM()}))
			return []M{p, n, rdzv(), with(exclusiveWL, func(w *wlB) { w.c().setEnv("NCCL_IB_GID_INDEX", "3") }).obj()}
		}},
		{name: "GID index unset", rule: "RDMA070", docs: excl(same)},
		{name: "GID index suppressed by annotation", rule: "RDMA070", docs: excl(func(w *wlB) {
			w.c().setEnv("NCCL_IB_GID_INDEX", "3")
			w.ann[DisableAnnotation] = "RDMA070"
		})},
		// RDMA071
		{name: "IB disabled with VF", rule: "RDMA071", trigger: true, docs: excl(func(w *wlB) { w.c().setEnv("NCCL_IB_DISABLE", "1") })},
		{name: "NCCL_NET=Socket with shared slot", rule: "RDMA071", trigger: true, docs: shared(func(w *wlB) { w.c().setEnv("NCCL_NET", "Socket") })},
		{name: "IB enabled", rule: "RDMA071", docs: excl(func(w *wlB) { w.c().setEnv("NCCL_IB_DISABLE", "0") })},
		// RDMA072
		{name: "eth0 with secondary net", rule: "RDMA072", trigger: true, docs: excl(func(w *wlB) { w.c().setEnv("NCCL_SOCKET_IFNAME", "eth0") })},
		{name: "eth prefix with secondary eth1", rule: "RDMA072", trigger: true, docs: excl(func(w *wlB) {
			w.ann[manifest.NetworksAnnotation] = "train-rdma@eth1"
			w.c().setEnv("NCCL_SOCKET_IFNAME", "eth")
		})},
		{name: "net1 selected", rule: "RDMA072", docs: excl(same)},
		// RDMA073
		{name: "eth1 but annotation inserts net1", rule: "RDMA073", trigger: true, docs: excl(func(w *wlB) { w.c().setEnv("NCCL_SOCKET_IFNAME", "eth1") })},
		{name: "net1 without any secondary network", rule: "RDMA073", trigger: true, docs: func() []M {
			return []M{with(exclusiveWL, func(w *wlB) {
				w.ann = nil
				w.c().limits = M{"nvidia.com/gpu": "8"}
				w.c().requests = nil
			}).obj()}
		}},
		{name: "Multus name in a hostNetwork pod is a warning", rule: "RDMA073", trigger: true, sev: Warning, docs: host(func(w *wlB) { w.c().setEnv("NCCL_SOCKET_IFNAME", "net1") })},
		{name: "default Multus name net1", rule: "RDMA073", docs: excl(func(w *wlB) { w.ann[manifest.NetworksAnnotation] = "train-rdma" })},
		{name: "exclusion list", rule: "RDMA073", docs: excl(func(w *wlB) { w.c().setEnv("NCCL_SOCKET_IFNAME", "^eth0,lo") })},
		// RDMA074
		{name: "secondary net, ifname unset", rule: "RDMA074", trigger: true, docs: excl(func(w *wlB) { w.c().setEnv("NCCL_SOCKET_IFNAME", "-") })},
		{name: "secondary net, ifname set", rule: "RDMA074", docs: excl(same)},
		// RDMA075
		{name: "HCA in NCCL_SOCKET_IFNAME", rule: "RDMA075", trigger: true, docs: excl(func(w *wlB) { w.c().setEnv("NCCL_SOCKET_IFNAME", "mlx5_0") })},
		{name: "netdev in NCCL_IB_HCA", rule: "RDMA075", trigger: true, docs: shared(func(w *wlB) { w.c().setEnv("NCCL_IB_HCA", "net1") })},
		{name: "HCA in NCCL_IB_HCA", rule: "RDMA075", docs: shared(func(w *wlB) { w.c().setEnv("NCCL_IB_HCA", "=mlx5_0:1") })},
		// RDMA076
		{name: "exclusive pins mlx5_3", rule: "RDMA076", trigger: true, docs: excl(func(w *wlB) { w.c().setEnv("NCCL_IB_HCA", "mlx5_3") })},
		{name: "exclusive with mlx5 prefix", rule: "RDMA076", docs: excl(func(w *wlB) { w.c().setEnv("NCCL_IB_HCA", "mlx5") })},
		{name: "shared pins mlx5_0", rule: "RDMA076", docs: shared(func(w *wlB) { w.c().setEnv("NCCL_IB_HCA", "mlx5_0") })},
		// RDMA077
		{name: "default-route in annotation", rule: "RDMA077", trigger: true, docs: excl(func(w *wlB) {
			w.ann[manifest.NetworksAnnotation] = `[{"name": "train-rdma", "interface": "net1", "default-route": ["10.60.0.1"]}]`
		})},
		{name: "no default-route", rule: "RDMA077", docs: excl(same)},
		// RDMA078
		{name: "GPU job without RDMA", rule: "RDMA078", trigger: true, docs: func() []M {
			return []M{with(exclusiveWL, func(w *wlB) {
				w.ann = nil
				w.c().limits = M{"nvidia.com/gpu": "8"}
				w.c().requests = nil
				w.c().env = nil
				w.c().caps = nil
			}).obj()}
		}},
		{name: "GPU job with explicit socket baseline", rule: "RDMA078", docs: func() []M {
			return []M{with(exclusiveWL, func(w *wlB) {
				w.ann = nil
				w.c().limits = M{"nvidia.com/gpu": "8"}
				w.c().requests = nil
				w.c().env = [][2]string{{"NCCL_IB_DISABLE", "1"}}
			}).obj()}
		}},
		// RDMA079
		{name: "VF and shared slot in one pod", rule: "RDMA079", trigger: true, docs: func() []M {
			return []M{vfPool(), sharedPool(), exclusiveNAD(), sharedNAD(), rdzv(), with(exclusiveWL, func(w *wlB) {
				w.c().limits = M{vfRes: "1", sharedRes: "1"}
				w.c().requests = nil
			}).obj()}
		}},
		{name: "only VF", rule: "RDMA079", docs: excl(same)},
		// RDMA085
		{name: "two pods, default scheduler", rule: "RDMA085", trigger: true, docs: excl(same)},
		{name: "two pods, Volcano", rule: "RDMA085", docs: excl(func(w *wlB) { w.scheduler = "volcano" })},
		{name: "two pods, Kueue queue label", rule: "RDMA085", docs: excl(func(w *wlB) { w.labels["kueue.x-k8s.io/queue-name"] = "gpu" })},
		{name: "operator CRD", rule: "RDMA085", docs: excl(func(w *wlB) { w.kind = "PyTorchJob" })},
		// RDMA086
		{name: "no anti-affinity", rule: "RDMA086", trigger: true, docs: excl(same)},
		{name: "required anti-affinity on hostname", rule: "RDMA086", docs: excl(func(w *wlB) { w.antiAffinity = true })},
		// RDMA087
		{name: "NetworkPolicy selecting hostNetwork pods", rule: "RDMA087", trigger: true, docs: func() []M {
			np := M{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": M{"name": "deny", "namespace": ns}, "spec": M{"podSelector": M{}, "policyTypes": []string{"Ingress"}}}
			return append(hostSet(hostWL()), np)
		}},
		{name: "NetworkPolicy selecting other pods", rule: "RDMA087", docs: func() []M {
			np := M{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": M{"name": "deny", "namespace": ns}, "spec": M{"podSelector": M{"matchLabels": M{"app": "web"}}}}
			return append(hostSet(hostWL()), np)
		}},
		// RDMA088
		{name: "ClusterPolicy without driver.rdma", rule: "RDMA088", trigger: true, docs: func() []M {
			cp := M{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": M{"name": "cluster-policy"}, "spec": M{"driver": M{"enabled": true}}}
			return append(exclusiveSet(exclusiveWL()), cp)
		}},
		{name: "ClusterPolicy with driver.rdma.enabled", rule: "RDMA088", docs: func() []M {
			cp := M{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": M{"name": "cluster-policy"}, "spec": M{"driver": M{"rdma": M{"enabled": true}}}}
			return append(exclusiveSet(exclusiveWL()), cp)
		}},
		// RDMA080
		{name: "rendezvous Service with ClusterIP", rule: "RDMA080", trigger: true, docs: func() []M {
			return []M{vfPool(), exclusiveNAD(), serviceObj(rdzvService, ns, map[string]string{"app": "train"}, false), with(exclusiveWL, func(w *wlB) { w.c().setEnv("MASTER_ADDR", rdzvService) }).obj()}
		}},
		{name: "headless rendezvous", rule: "RDMA080", docs: excl(same)},
		// RDMA081
		{name: "selector matches nothing", rule: "RDMA081", trigger: true, docs: func() []M {
			return []M{vfPool(), exclusiveNAD(), serviceObj(rdzvService, ns, map[string]string{"app": "trainer"}, true), exclusiveWL().obj()}
		}},
		{name: "selector uses Job's automatic label", rule: "RDMA081", docs: func() []M {
			return []M{vfPool(), exclusiveNAD(), serviceObj(rdzvService, ns, map[string]string{"job-name": "train"}, true), exclusiveWL().obj()}
		}},
		{name: "CRD selector on operator labels", rule: "RDMA081", docs: func() []M {
			return []M{vfPool(), exclusiveNAD(), serviceObj(rdzvService, ns, map[string]string{"training.kubeflow.org/replica-index": "0"}, true), with(exclusiveWL, func(w *wlB) { w.kind = "PyTorchJob" }).obj()}
		}},
		// RDMA082
		{name: "missing subdomain", rule: "RDMA082", trigger: true, docs: excl(func(w *wlB) { w.subdomain = "" })},
		{name: "non-indexed Job hostname", rule: "RDMA082", trigger: true, docs: excl(func(w *wlB) { w.indexed = false })},
		{name: "StatefulSet serviceName mismatch", rule: "RDMA082", trigger: true, docs: func() []M {
			return []M{vfPool(), exclusiveNAD(), rdzv(), with(exclusiveWL, func(w *wlB) {
				w.kind = "StatefulSet"
				w.subdomain = "other"
			}).obj()}
		}},
		{name: "indexed Job with subdomain", rule: "RDMA082", docs: excl(same)},
		// RDMA083
		{name: "MASTER_ADDR Service absent", rule: "RDMA083", trigger: true, docs: func() []M { return []M{vfPool(), exclusiveNAD(), exclusiveWL().obj()} }},
		{name: "MASTER_ADDR is an IP", rule: "RDMA083", docs: excl(func(w *wlB) { w.c().setEnv("MASTER_ADDR", "10.0.0.5") })},
		// RDMA084
		{name: "headless without publishNotReadyAddresses", rule: "RDMA084", trigger: true, docs: func() []M {
			s := rdzv()
			delete(s["spec"].(M), "publishNotReadyAddresses")
			return []M{vfPool(), exclusiveNAD(), s, exclusiveWL().obj()}
		}},
		{name: "headless publishing not-ready", rule: "RDMA084", docs: excl(same)},
	}...)
}

func TestRules(t *testing.T) {
	for _, tc := range ruleCases() {
		t.Run(tc.rule+"/"+tc.name, func(t *testing.T) {
			res := lintDocs(t, tc.docs())
			var hits []Finding
			for _, f := range res.Findings {
				if f.Rule == tc.rule {
					hits = append(hits, f)
				}
			}
			if tc.trigger && len(hits) == 0 {
				t.Fatalf("want %s, got findings:\n%s", tc.rule, dump(res))
			}
			if !tc.trigger && len(hits) > 0 {
				t.Fatalf("want no %s, got:\n%s", tc.rule, dump(res))
			}
			for _, f := range hits {
				want := tc.sev
				if want == "" {
					want = ruleByID[tc.rule].Severity
				}
				if f.Severity != want {
					t.Errorf("%s severity = %s, want %s (%s)", f.Rule, f.Severity, want, f.Message)
				}
				if f.Object == "" || f.Field == "" || f.Message == "" || f.Fix == "" {
					t.Errorf("finding lacks object/field/message/fix: %+v", f)
				}
			}
		})
	}
}

// TestEveryRuleIsTested: each catalogue rule has a triggering and a
// non-triggering case.
func TestEveryRuleIsTested(t *testing.T) {
	trig, clean := map[string]bool{}, map[string]bool{}
	for _, tc := range ruleCases() {
		if _, ok := ruleByID[tc.rule]; !ok {
			t.Errorf("case %q names unknown rule %s", tc.name, tc.rule)
		}
		if tc.trigger {
			trig[tc.rule] = true
		} else {
			clean[tc.rule] = true
		}
	}
	for _, r := range Catalogue {
		if !trig[r.ID] {
			t.Errorf("%s has no triggering test case", r.ID)
		}
		if !clean[r.ID] {
			t.Errorf("%s has no non-triggering test case", r.ID)
		}
	}
}

func TestCatalogueIDsUnique(t *testing.T) {
	seen := map[string]bool{}
	names := map[string]bool{}
	for _, r := range Catalogue {
		if seen[r.ID] || names[r.Name] {
			t.Errorf("duplicate rule %s / %s", r.ID, r.Name)
		}
		seen[r.ID], names[r.Name] = true, true
		if r.Why == "" || r.Fix == "" || r.Summary == "" || !strings.Contains(r.Why, "Seed") {
			t.Errorf("%s: summary, why (citing a seed) and fix are required", r.ID)
		}
	}
}

func dump(r *Result) string {
	var b strings.Builder
	for _, w := range r.Workloads {
		fmt.Fprintf(&b, "  workload %s/%s/%s mode=%s\n", w.Kind, w.Namespace, w.Name, w.Mode)
	}
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "  %s %s %s %s: %s\n", f.Severity, f.Rule, f.Object, f.Field, f.Message)
	}
	return b.String()
}
