package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

type obj = map[string]any

// Document is one rendered object with a comment naming its role.
type Document struct {
	Comment string
	Object  map[string]any
}

// rail is one training network: its pool, NAD, subnet and in-pod interface.
type rail struct {
	pfs          []string
	resourceName string
	network      string
	iface        string
	subnet       string
	exclude      []string
}

func (r rail) resource(s Spec) string { return s.ResourcePrefix + "/" + r.resourceName }

// rails splits the spec into its networks: one for a single-rail spec (all
// PFs in one pool), one per PF for a multi-rail spec.
func rails(s Spec) []rail {
	if len(s.Subnets) == 0 {
		return []rail{{pfs: s.PFNames, resourceName: s.ResourceName, network: s.Network, iface: s.Interface, subnet: s.Subnet, exclude: s.Exclude}}
	}
	out := make([]rail, len(s.PFNames))
	for i, pf := range s.PFNames {
		out[i] = rail{pfs: []string{pf}, resourceName: fmt.Sprintf("%s_%d", s.ResourceName, i), network: fmt.Sprintf("%s-%d", s.Network, i),
			iface: fmt.Sprintf("net%d", i+1), subnet: s.Subnets[i]}
	}
	return out
}

// Render defaults and validates the spec and returns the manifests of its mode.
func Render(s Spec) ([]Document, error) {
	s.Default()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var docs []Document
	rs := rails(s)
	var names []string
	for _, r := range rs {
		names = append(names, r.resource(s))
	}
	draNote := ""
	if s.DRA {
		draNote = "; with --dra rdmanet-agent publishes these pools to DRA (driver " + DRADriver + ")"
	}
	ib := ""
	if s.IB() {
		ib = "InfiniBand "
	}
	switch s.Mode {
	case ModeExclusive:
		docs = append(docs, Document{"SR-IOV VF pool: registers RDMA-capable " + ib + "VFs of the PFs as " + strings.Join(names, ", ") + draNote, sriovPool(s, rs)})
		docs = append(docs, deviceClasses(s, rs)...)
		for _, r := range rs {
			if s.IB() {
				docs = append(docs, Document{"training network: ib-sriov gives the VF a GUID (the pod's infiniband-guid or the GUID pool's) and moves its IPoIB netdev in as " + r.iface + partitionNote(s) + ", rdma moves its RDMA device; no default route", ibSRIOVNAD(s, r)})
				continue
			}
			docs = append(docs, Document{"training network: sriov moves the VF in as " + r.iface + ", rdma moves its RDMA device; no default route", exclusiveNAD(s, r)})
		}
	case ModeShared:
		docs = append(docs, Document{"shared HCA pool: " + strconv.Itoa(s.RdmaHcaMax) + " pods may share each " + ib + "HCA (" + strings.Join(names, ", ") + "); the node's RDMA subsystem must be in shared netns mode" + draNote, sharedPool(s, rs)})
		docs = append(docs, deviceClasses(s, rs)...)
		for _, r := range rs {
			if s.IB() {
				docs = append(docs, Document{"training network: IPoIB child of the IB port's netdev as " + r.iface + partitionNote(s) + "; no default route", ipoibNAD(s, r)})
				continue
			}
			docs = append(docs, Document{"training network: macvlan child of the RoCE PF as " + r.iface + "; no default route", sharedNAD(s, r)})
		}
	case ModeHost:
		docs = append(docs,
			Document{"shared " + ib + "HCA pool: hands the /dev/infiniband device nodes to hostNetwork pods as " + s.ResourceFullName(), sharedPool(s, rs)})
	}
	if s.DRA {
		docs = append(docs, Document{claimTemplateComment(s, rs), claimTemplate(s, rs)})
	}
	docs = append(docs,
		Document{"headless rendezvous Service: <job>-<index>." + s.Name + "-rdzv resolves to each pod", service(s)},
		Document{fmt.Sprintf("training Job: %d nodes x %d GPUs, mode %s%s", s.Nodes, s.GPUsPerNode, s.Mode, map[bool]string{true: ", devices from the DRA claim " + claimTemplateName(s)}[s.DRA]), job(s)})
	return docs, nil
}

// Write renders to w as a YAML stream.
func Write(w io.Writer, docs []Document) error {
	var b bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "# %s\n", d.Comment)
		y, err := yaml.Marshal(d.Object)
		if err != nil {
			return err
		}
		b.Write(y)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}

func sriovPool(s Spec, rs []rail) obj {
	var list []any
	for _, r := range rs {
		sel := obj{"vendors": s.Vendors, "pfNames": r.pfs, "isRdma": true}
		if len(s.DeviceIDs) > 0 {
			sel["devices"] = s.DeviceIDs
		}
		if s.IB() {
			sel["linkTypes"] = []string{LinkInfiniBand}
		}
		list = append(list, obj{"resourcePrefix": s.ResourcePrefix, "resourceName": r.resourceName, "selectors": []any{sel}})
	}
	return obj{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": obj{"name": "sriovdp-config", "namespace": s.PoolNamespace},
		"data":     obj{"config.json": mustJSON(obj{"resourceList": list})}}
}

func sharedPool(s Spec, rs []rail) obj {
	var list []any
	for _, r := range rs {
		sel := obj{"vendors": s.Vendors, "ifNames": r.pfs}
		if len(s.DeviceIDs) > 0 {
			sel["deviceIDs"] = s.DeviceIDs
		}
		if s.IB() {
			sel["linkTypes"] = []string{LinkInfiniBand}
		}
		list = append(list, obj{"resourcePrefix": s.ResourcePrefix, "resourceName": r.resourceName, "rdmaHcaMax": s.RdmaHcaMax, "selectors": sel})
	}
	cfg := obj{"configList": list}
	if s.PoolFormat == PoolNicClusterPolicy {
		return obj{"apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy",
			"metadata": obj{"name": "nic-cluster-policy"},
			"spec":     obj{"rdmaSharedDevicePlugin": obj{"config": mustJSON(cfg)}}}
	}
	return obj{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": obj{"name": "rdma-devices", "namespace": s.PoolNamespace},
		"data":     obj{"config.json": mustJSON(cfg)}}
}

func ipam(r rail) obj {
	m := obj{"type": "rdmanet-ipam", "range": r.subnet}
	if len(r.exclude) > 0 {
		m["exclude"] = r.exclude
	}
	return m
}

func nad(s Spec, r rail, cfg obj) obj {
	return obj{"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": obj{"name": r.network, "namespace": s.Namespace,
			"annotations": obj{"k8s.v1.cni.cncf.io/resourceName": r.resource(s)}},
		"spec": obj{"config": mustJSON(cfg)}}
}

func exclusiveNAD(s Spec, r rail) obj {
	sriov := obj{"type": "sriov", "spoofchk": "on", "trust": "off", "ipam": ipam(r)}
	if s.VLAN != 0 {
		sriov["vlan"] = s.VLAN
	}
	return nad(s, r, obj{"cniVersion": "0.3.1", "name": r.network, "plugins": []any{sriov, obj{"type": "rdma"}}})
}

// ibSRIOVNAD is ib-sriov-cni's configuration: the VF's GUID from the pod's
// infiniband-guid (the capability) or rdmanet's GUID pool, the link state,
// the partition; the rdma step moves the RDMA device.
func ibSRIOVNAD(s Spec, r rail) obj {
	ib := obj{"type": "ib-sriov", "link_state": "enable", "capabilities": obj{"infinibandGUID": true}, "ipam": ipam(r)}
	if k := s.pkey(); k != "" {
		ib["pkey"] = k
	}
	return nad(s, r, obj{"cniVersion": "0.3.1", "name": r.network, "plugins": []any{ib, obj{"type": "rdma"}}})
}

// ipoibNAD is ipoib-cni's configuration: a child of the IB port's IPoIB
// netdev (master), in the network's partition when it names one.
func ipoibNAD(s Spec, r rail) obj {
	p := obj{"type": "ipoib", "master": r.pfs[0], "ipam": ipam(r)}
	if k := s.pkey(); k != "" {
		p["pkey"] = k
	}
	if s.MTU != 0 {
		p["mtu"] = s.MTU
	}
	return nad(s, r, obj{"cniVersion": "0.3.1", "name": r.network, "plugins": []any{p}})
}

func partitionNote(s Spec) string {
	if k := s.pkey(); k != "" {
		return " in partition " + k + " (the subnet manager must admit the GUID)"
	}
	return ""
}

func sharedNAD(s Spec, r rail) obj {
	return nad(s, r, obj{"cniVersion": "0.3.1", "name": r.network, "plugins": []any{
		obj{"type": "macvlan", "master": r.pfs[0], "mode": "bridge", "mtu": s.MTU, "ipam": ipam(r)}}})
}

func svcName(s Spec) string { return s.Name + "-rdzv" }

func service(s Spec) obj {
	return obj{"apiVersion": "v1", "kind": "Service",
		"metadata": obj{"name": svcName(s), "namespace": s.Namespace},
		"spec": obj{"clusterIP": "None", "publishNotReadyAddresses": true,
			"selector": obj{"app": s.Name},
			"ports":    []any{obj{"name": "torch-rdzv", "port": s.Port}}}}
}

func job(s Spec) obj {
	env := []any{
		obj{"name": "MASTER_ADDR", "value": fmt.Sprintf("%s-0.%s.%s.svc.cluster.local", s.Name, svcName(s), s.Namespace)},
		obj{"name": "MASTER_PORT", "value": strconv.Itoa(s.Port)},
	}
	ifname := s.Interface
	if s.Mode == ModeHost {
		ifname = s.SocketIfname
	}
	env = append(env, obj{"name": "NCCL_SOCKET_IFNAME", "value": "=" + ifname}, obj{"name": "NCCL_IB_DISABLE", "value": "0"})
	if s.NCCLDebug {
		env = append(env, obj{"name": "NCCL_DEBUG", "value": "INFO"}, obj{"name": "NCCL_DEBUG_SUBSYS", "value": "INIT,NET"})
	}
	rs := rails(s)
	res := obj{}
	switch {
	case s.DRA:
		// NICs and GPUs come from the claim: no device plugin limits.
	case s.Mode == ModeHost:
		res[s.ResourceFullName()] = strconv.Itoa(s.RDMAPerPod)
	default:
		for _, r := range rs {
			res[r.resource(s)] = "1"
		}
	}
	if s.GPUsPerNode > 0 && !s.DRA {
		res["nvidia.com/gpu"] = strconv.Itoa(s.GPUsPerNode)
	}
	cmd := s.Command
	if len(cmd) == 0 {
		nproc := s.GPUsPerNode
		if nproc == 0 {
			nproc = 1
		}
		cmd = []string{"/bin/bash", "-ceu", strings.Join([]string{
			"exec torchrun \\",
			fmt.Sprintf("  --nnodes=%d \\", s.Nodes),
			fmt.Sprintf("  --nproc-per-node=%d \\", nproc),
			`  --node-rank="${JOB_COMPLETION_INDEX}" \`,
			`  --master-addr="${MASTER_ADDR}" \`,
			`  --master-port="${MASTER_PORT}" \`,
			"  " + s.Script,
		}, "\n") + "\n"}
	}
	resources := obj{}
	if len(res) > 0 {
		resources["limits"], resources["requests"] = res, res
	}
	if s.DRA {
		resources["claims"] = []any{obj{"name": draClaimName}}
	}
	ctr := obj{"name": "trainer", "image": s.Image, "command": cmd, "env": env,
		"resources":       resources,
		"securityContext": obj{"capabilities": obj{"add": []string{"IPC_LOCK"}}}}
	podSpec := obj{"subdomain": svcName(s), "restartPolicy": "Never", "containers": []any{ctr},
		// One training pod per node (seed 1: the replicas belong on different nodes).
		"affinity": obj{"podAntiAffinity": obj{"requiredDuringSchedulingIgnoredDuringExecution": []any{
			obj{"labelSelector": obj{"matchLabels": obj{"app": s.Name}}, "topologyKey": "kubernetes.io/hostname"}}}}}
	if s.DRA {
		podSpec["resourceClaims"] = []any{obj{"name": draClaimName, "resourceClaimTemplateName": claimTemplateName(s)}}
	}
	meta := obj{"labels": obj{"app": s.Name}}
	switch s.Mode {
	case ModeHost:
		podSpec["hostNetwork"] = true
		podSpec["dnsPolicy"] = "ClusterFirstWithHostNet"
		// Whole-node placement: the fixed MASTER_PORT is a node port (seed 2, 十三.1).
		meta["annotations"] = obj{"rdmanet.io/node-exclusive": "true"}
	default:
		var sel []any
		for _, r := range rs {
			sel = append(sel, obj{"name": r.network, "interface": r.iface})
		}
		meta["annotations"] = obj{"k8s.v1.cni.cncf.io/networks": mustJSONCompact(sel)}
	}
	return obj{"apiVersion": "batch/v1", "kind": "Job",
		"metadata": obj{"name": s.Name, "namespace": s.Namespace},
		"spec": obj{"completions": s.Nodes, "parallelism": s.Nodes, "completionMode": "Indexed", "backoffLimit": 0,
			"template": obj{"metadata": meta, "spec": podSpec}}}
}

func mustJSONCompact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
