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

// Render defaults and validates the spec and returns the manifests of its mode.
func Render(s Spec) ([]Document, error) {
	s.Default()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var docs []Document
	switch s.Mode {
	case ModeExclusive:
		docs = append(docs,
			Document{"SR-IOV VF pool: registers RDMA-capable VFs of the PFs as " + s.ResourceFullName(), sriovPool(s)},
			Document{"training network: sriov moves the VF in as " + s.Interface + ", rdma moves its RDMA device; no default route", exclusiveNAD(s)})
	case ModeShared:
		docs = append(docs,
			Document{"shared HCA pool: " + strconv.Itoa(s.RdmaHcaMax) + " pods may share each HCA (" + s.ResourceFullName() + "); the node's RDMA subsystem must be in shared netns mode", sharedPool(s)},
			Document{"training network: macvlan child of the RoCE PF as " + s.Interface + "; no default route", sharedNAD(s)})
	case ModeHost:
		docs = append(docs,
			Document{"shared HCA pool: hands the /dev/infiniband device nodes to hostNetwork pods as " + s.ResourceFullName(), sharedPool(s)})
	}
	docs = append(docs,
		Document{"headless rendezvous Service: <job>-<index>." + s.Name + "-rdzv resolves to each pod", service(s)},
		Document{fmt.Sprintf("training Job: %d nodes x %d GPUs, mode %s", s.Nodes, s.GPUsPerNode, s.Mode), job(s)})
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

func sriovPool(s Spec) obj {
	sel := obj{"vendors": s.Vendors, "pfNames": s.PFNames, "isRdma": true}
	if len(s.DeviceIDs) > 0 {
		sel["devices"] = s.DeviceIDs
	}
	cfg := obj{"resourceList": []any{obj{"resourcePrefix": s.ResourcePrefix, "resourceName": s.ResourceName, "selectors": []any{sel}}}}
	return obj{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": obj{"name": "sriovdp-config", "namespace": s.PoolNamespace},
		"data":     obj{"config.json": mustJSON(cfg)}}
}

func sharedPool(s Spec) obj {
	sel := obj{"vendors": s.Vendors, "ifNames": s.PFNames}
	if len(s.DeviceIDs) > 0 {
		sel["deviceIDs"] = s.DeviceIDs
	}
	cfg := obj{"configList": []any{obj{"resourcePrefix": s.ResourcePrefix, "resourceName": s.ResourceName, "rdmaHcaMax": s.RdmaHcaMax, "selectors": sel}}}
	if s.PoolFormat == PoolNicClusterPolicy {
		return obj{"apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy",
			"metadata": obj{"name": "nic-cluster-policy"},
			"spec":     obj{"rdmaSharedDevicePlugin": obj{"config": mustJSON(cfg)}}}
	}
	return obj{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": obj{"name": "rdma-devices", "namespace": s.PoolNamespace},
		"data":     obj{"config.json": mustJSON(cfg)}}
}

func ipam(s Spec) obj {
	m := obj{"type": "rdmanet-ipam", "range": s.Subnet}
	if len(s.Exclude) > 0 {
		m["exclude"] = s.Exclude
	}
	return m
}

func nad(s Spec, cfg obj) obj {
	return obj{"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": obj{"name": s.Network, "namespace": s.Namespace,
			"annotations": obj{"k8s.v1.cni.cncf.io/resourceName": s.ResourceFullName()}},
		"spec": obj{"config": mustJSON(cfg)}}
}

func exclusiveNAD(s Spec) obj {
	sriov := obj{"type": "sriov", "spoofchk": "on", "trust": "off", "ipam": ipam(s)}
	if s.VLAN != 0 {
		sriov["vlan"] = s.VLAN
	}
	return nad(s, obj{"cniVersion": "0.3.1", "name": s.Network, "plugins": []any{sriov, obj{"type": "rdma"}}})
}

func sharedNAD(s Spec) obj {
	return nad(s, obj{"cniVersion": "0.3.1", "name": s.Network, "plugins": []any{
		obj{"type": "macvlan", "master": s.PFNames[0], "mode": "bridge", "mtu": s.MTU, "ipam": ipam(s)}}})
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
	res := obj{s.ResourceFullName(): strconv.Itoa(s.RDMAPerPod)}
	if s.GPUsPerNode > 0 {
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
	ctr := obj{"name": "trainer", "image": s.Image, "command": cmd, "env": env,
		"resources":       obj{"limits": res, "requests": res},
		"securityContext": obj{"capabilities": obj{"add": []string{"IPC_LOCK"}}}}
	podSpec := obj{"subdomain": svcName(s), "restartPolicy": "Never", "containers": []any{ctr},
		// One training pod per node (seed 1: the replicas belong on different nodes).
		"affinity": obj{"podAntiAffinity": obj{"requiredDuringSchedulingIgnoredDuringExecution": []any{
			obj{"labelSelector": obj{"matchLabels": obj{"app": s.Name}}, "topologyKey": "kubernetes.io/hostname"}}}}}
	meta := obj{"labels": obj{"app": s.Name}}
	switch s.Mode {
	case ModeHost:
		podSpec["hostNetwork"] = true
		podSpec["dnsPolicy"] = "ClusterFirstWithHostNet"
		// Whole-node placement: the fixed MASTER_PORT is a node port (seed 2, 十三.1).
		meta["annotations"] = obj{"rdmanet.io/node-exclusive": "true"}
	default:
		meta["annotations"] = obj{"k8s.v1.cni.cncf.io/networks": mustJSONCompact([]any{obj{"name": s.Network, "interface": s.Interface}})}
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
