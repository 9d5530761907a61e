package verify

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vt "github.com/rdmanet/rdmanet/internal/verify/verifytest"
)

func otherPodOnNode(name, res string, n string) corev1.Pod {
	q := corev1.ResourceList{corev1.ResourceName(res): resource.MustParse(n)}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "other"},
		Spec:   corev1.PodSpec{NodeName: testNode, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: q}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func factsFor(pod *corev1.Pod, nads map[string]*NAD, exec map[string]string) *Facts {
	return &Facts{Pod: pod, Container: "trainer", Node: testNodeObj(),
		NodePods: []corev1.Pod{*pod, otherPodOnNode("done", "example.com/sriov_rdma", "4"), otherPodOnNode("peer", "example.com/sriov_rdma", "2")},
		NADs:     nads, Exec: exec}
}

func exclusiveFacts() *Facts {
	f := factsFor(exclusivePod(), map[string]*NAD{"ai-training/face-training-rdma": nadFrom(exclusiveNAD())}, exclusiveExec())
	f.NodePods[1].Status.Phase = corev1.PodSucceeded
	return f
}

func sharedFacts() *Facts {
	return factsFor(sharedPod(), map[string]*NAD{"ai-training/face-training-shared": nadFrom(sharedNAD())}, sharedExec())
}

func hostFacts() *Facts { return factsFor(hostPod(), map[string]*NAD{}, hostExec()) }

// allOK is every check at OK except those named.
func allOK(except map[string]Status) map[string]Status {
	m := map[string]Status{}
	for _, c := range Catalogue {
		m[c.ID] = OK
	}
	m[IDNCCLLog] = Skip
	m[IDIBPort], m[IDIBPKey] = Skip, Skip // RoCE pods
	for k, v := range except {
		m[k] = v
	}
	return m
}

var hostSkips = map[string]Status{IDNADExists: Skip, IDNADResource: Skip, IDNetworkStatus: Skip, IDDeviceInfo: Skip, IDTrainingIf: Skip, IDDefaultRoute: Skip}

func with(m map[string]Status, kv ...any) map[string]Status {
	out := map[string]Status{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1].(Status)
	}
	return out
}

type runCase struct {
	name  string
	facts func() *Facts
	mode  string
	want  map[string]Status
	// evidence holds substrings the named check's evidence (or fix,
	// after "fix:") must contain.
	evidence map[string][]string
}

func ibExclusiveFacts() *Facts {
	return factsFor(vt.IBExclusivePod(), map[string]*NAD{"ai-training/ib-training": nadFrom(vt.IBExclusiveNAD())}, vt.IBExclusiveExec())
}

func ibSharedFacts() *Facts {
	return factsFor(vt.IBSharedPod(), map[string]*NAD{"ai-training/ib-shared": nadFrom(vt.IBSharedNAD())}, vt.IBSharedExec())
}

func ibOnlyFacts() *Facts {
	return factsFor(vt.IBOnlyPod(), map[string]*NAD{"ai-training/ib-only": nadFrom(vt.IBOnlyNAD())}, vt.IBOnlyExec())
}

// withIBPort replaces the exec output's lines of dev's IB port.
func withIBPort(f *Facts, dev, state, lid, smLID string, pkeys []string, gid0 string) *Facts {
	var keep []string
	for _, l := range strings.Split(f.Exec[SecIB], "\n") {
		fs := strings.Fields(l)
		if len(fs) > 1 && fs[0] != "dev" && fs[1] == dev {
			continue
		}
		keep = append(keep, l)
	}
	f.Exec[SecIB] = strings.Join(keep, "\n") + vt.IBPortLines(dev, state, lid, smLID, pkeys, gid0)
	return f
}

// ibOK is every check at OK for a pod on InfiniBand: no RoCE GID.
func ibOK(except map[string]Status) map[string]Status {
	m := allOK(map[string]Status{IDIBPort: OK, IDIBPKey: OK, IDRoCEGID: Skip})
	for k, v := range except {
		m[k] = v
	}
	return m
}

func ibCases() []runCase {
	const vfGID = "fe80:0000:0000:0000:0200:0000:0000:0005"
	return []runCase{
		{
			name: "good IB exclusive pod (ib-sriov)", facts: ibExclusiveFacts, mode: ModeExclusive,
			want: ibOK(nil),
			evidence: map[string][]string{
				IDIBPort:       {"mlx5_4 port 1 ACTIVE, LID 0x14, SM LID 0x1, PKeys 0xffff 0x8005, port GUID 02:00:00:00:00:00:00:05"},
				IDIBPKey:       {"mlx5_4 port 1 (NAD ai-training/ib-training): full member of PKey 0x8005"},
				IDRoCEGID:      {"InfiniBand ports (mlx5_4 port 1): no GID index needed"},
				IDNCCLGIDIndex: {"unset: InfiniBand needs no GID index"},
				IDRDMADevice:   {"exclusive VF device mlx5_4 (net1)"},
			},
		},
		{
			name: "IB exclusive pod with NCCL_IB_GID_INDEX set: harmless", mode: ModeExclusive,
			facts: func() *Facts {
				f := ibExclusiveFacts()
				f.Exec[SecEnv1] += "NCCL_IB_GID_INDEX=3\n"
				return f
			},
			want:     ibOK(nil),
			evidence: map[string][]string{IDNCCLGIDIndex: {"NCCL_IB_GID_INDEX=3 is ignored on InfiniBand", "harmless"}},
		},
		{
			name: "IB port INIT: no subnet manager", mode: ModeExclusive,
			facts: func() *Facts {
				return withIBPort(ibExclusiveFacts(), "mlx5_4", "2: INIT", "0x0", "0x0", []string{"0xffff", "0x8005"}, vfGID)
			},
			want:     ibOK(map[string]Status{IDIBPort: Problem}),
			evidence: map[string][]string{IDIBPort: {"mlx5_4 port 1 is 2: INIT, not ACTIVE", "fix: an IB port stays INIT/ARMED until a subnet manager activates it", "opensm"}},
		},
		{
			name: "IB port ACTIVE but SM LID lost", mode: ModeExclusive,
			facts: func() *Facts {
				return withIBPort(ibExclusiveFacts(), "mlx5_4", "4: ACTIVE", "0x14", "0x0", []string{"0xffff", "0x8005"}, vfGID)
			},
			want:     ibOK(map[string]Status{IDIBPort: Problem}),
			evidence: map[string][]string{IDIBPort: {"mlx5_4 port 1: LID 0x14 but SM LID 0", "fix: check the subnet manager (`sminfo`)"}},
		},
		{
			name: "the network's PKey is not in the VF's table", mode: ModeExclusive,
			facts: func() *Facts {
				return withIBPort(ibExclusiveFacts(), "mlx5_4", "4: ACTIVE", "0x14", "0x1", []string{"0xffff"}, vfGID)
			},
			want: ibOK(map[string]Status{IDIBPKey: Problem}),
			evidence: map[string][]string{IDIBPKey: {"mlx5_4 port 1 (NAD ai-training/ib-training): PKey 0x8005 is not in the port's table (0xffff)",
				"fix: the subnet manager must add the port GUID 02:00:00:00:00:00:00:05 to partition 0x8005", "partitions.conf: `name=...,pkey=0x0005: 02:00:00:00:00:00:00:05=full;`"}},
		},
		{
			name: "limited member of the network's partition", mode: ModeExclusive,
			facts: func() *Facts {
				return withIBPort(ibExclusiveFacts(), "mlx5_4", "4: ACTIVE", "0x14", "0x1", []string{"0xffff", "0x0005"}, vfGID)
			},
			want:     ibOK(map[string]Status{IDIBPKey: Problem}),
			evidence: map[string][]string{IDIBPKey: {"only a limited member of PKey 0x8005"}},
		},
		{
			name: "IB port attributes hidden from the pod", mode: ModeExclusive,
			facts: func() *Facts {
				return withIBPort(ibExclusiveFacts(), "mlx5_4", "4: ACTIVE", "-", "-", nil, vfGID)
			},
			want:     ibOK(map[string]Status{IDIBPort: Unknown, IDIBPKey: Unknown}),
			evidence: map[string][]string{IDIBPort: {"LID, SM LID and PKey table unreadable", "fix: run kubectl rdma doctor on the node"}},
		},
		{
			name: "ib-sriov NAD, but the VF is RoCE", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				obj := vt.NADObject("face-training-rdma", "example.com/sriov_rdma", strings.ReplaceAll(vt.IBSRIOVConfig, `"ib-training"`, `"face-training-rdma"`))
				f.NADs["ai-training/face-training-rdma"] = nadFrom(obj)
				return f
			},
			want:     allOK(map[string]Status{IDIBPort: Problem}),
			evidence: map[string][]string{IDIBPort: {"the pod's network ai-training/face-training-rdma is InfiniBand (ib-sriov) but its RDMA ports are not: mlx5_3 [port 1 Ethernet"}},
		},
		{
			name: "good IB shared pod (ipoib)", facts: ibSharedFacts, mode: ModeShared,
			want: ibOK(map[string]Status{IDDeviceInfo: Skip}),
			evidence: map[string][]string{
				IDIBPort:    {"mlx5_2 port 1 ACTIVE, LID 0x12, SM LID 0x1, PKeys 0xffff 0x8005 0x8006"},
				IDIBPKey:    {"mlx5_2 port 1 (NAD ai-training/ib-shared): full member of PKey 0x8006"},
				IDNCCLIBHCA: {"NCCL_IB_HCA==mlx5_2 selects mlx5_2, the pod's HCA mlx5_2"},
			},
		},
		{
			name: "IB shared pod: NCCL_IB_HCA names another HCA than the IPoIB master's", mode: ModeShared,
			facts: func() *Facts {
				f := ibSharedFacts()
				f.Exec[SecEnv1] = strings.Replace(f.Exec[SecEnv1], "NCCL_IB_HCA==mlx5_2", "NCCL_IB_HCA==mlx5_1", 1)
				return f
			},
			want: ibOK(map[string]Status{IDDeviceInfo: Skip, IDNCCLIBHCA: Problem}),
			evidence: map[string][]string{
				IDNCCLIBHCA: {"NCCL_IB_HCA==mlx5_1 selects mlx5_1, not the pod's HCA mlx5_2", "fix: set NCCL_IB_HCA to the pod's HCA (mlx5_2)"},
				// the checks look at the pod's own port, not NCCL's
				IDIBPKey: {"mlx5_2 port 1 (NAD ai-training/ib-shared): full member of PKey 0x8006"},
			},
		},
		{
			name: "IB-only device: no net1", facts: ibOnlyFacts, mode: ModeExclusive,
			want: ibOK(nil),
			evidence: map[string][]string{
				IDTrainingIf:    {"IB-only device mlx5_8: no net1"},
				IDNetworkStatus: {"ai-training/ib-only: IB-only device mlx5_8 (no netdev, so no IPs)"},
				IDDefaultRoute:  {"IB-only device mlx5_8: no net1"},
				IDRDMADevice:    {"mlx5_8 (IB-only, no netdev)"},
				IDDeviceInfo:    {"mlx5_8: VF pci-address 0000:d1:00.2, rdma-device mlx5_8"},
				IDIBPort:        {"mlx5_8 port 1 ACTIVE, LID 0x15"},
			},
		},
	}
}

func runCases() []runCase {
	return append(baseCases(), ibCases()...)
}

func baseCases() []runCase {
	return []runCase{
		{
			name: "good exclusive pod", facts: exclusiveFacts, mode: ModeExclusive,
			want: allOK(nil),
			evidence: map[string][]string{
				IDNodeResource:  {"node gpu-node-a: example.com/sriov_rdma capacity 8, allocatable 8, allocated 3", "this pod requests 1"},
				IDDeviceInfo:    {"net1: VF pci-address 0000:3b:02.1, rdma-device mlx5_3"},
				IDNetworkStatus: {"ai-training/face-training-rdma on net1 with 192.168.100.12"},
				IDTrainingIf:    {"net1 up with 192.168.100.12"},
				IDDefaultRoute:  {"default via 10.244.1.1 dev eth0"},
				IDRDMADevice:    {"exclusive VF device mlx5_3 (net1)"},
				IDRoCEGID:       {"mlx5_3 port 1: RoCEv2 IPv4 GID index 3 = 192.168.100.12"},
				IDCapIPCLock:    {"bit 14"},
				IDNCCLGIDIndex:  {"NCCL_IB_GID_INDEX=3 is the RoCEv2 IPv4 index"},
			},
		},
		{
			name: "good shared pod", facts: sharedFacts, mode: ModeShared,
			want:     allOK(map[string]Status{IDDeviceInfo: Skip}),
			evidence: map[string][]string{IDRoCEGID: {"mlx5_0 port 1: RoCEv2 IPv4 GID index 5 = 192.168.100.21"}, IDNodeResource: {"rdma/hca_shared_devices_a capacity 64, allocatable 64, allocated 1"}},
		},
		{
			name: "good hostNetwork pod", facts: hostFacts, mode: ModeHost,
			want:     allOK(hostSkips),
			evidence: map[string][]string{IDRoCEGID: {"index 3 = 192.168.1.10 (ens1f0)"}, IDNCCLSocketIfname: {"NCCL_SOCKET_IFNAME=ens1f0 selects ens1f0"}, IDTrainingIf: {"hostNetwork pod"}},
		},
		{
			name: "NAD deleted after the pod started", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.NADs["ai-training/face-training-rdma"] = nil
				return f
			},
			want:     allOK(map[string]Status{IDNADExists: Problem, IDNADResource: Skip}),
			evidence: map[string][]string{IDNADExists: {"NetworkAttachmentDefinition ai-training/face-training-rdma", "does not exist", "fix: recreate the NAD"}},
		},
		{
			name: "wrong NCCL_SOCKET_IFNAME", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecEnv1] = strings.Replace(f.Exec[SecEnv1], "NCCL_SOCKET_IFNAME=net1", "NCCL_SOCKET_IFNAME=eth1", 1)
				return f
			},
			want:     allOK(map[string]Status{IDNCCLSocketIfname: Problem}),
			evidence: map[string][]string{IDNCCLSocketIfname: {"NCCL_SOCKET_IFNAME=eth1 selects no interface of the pod (has: lo, eth0, net1)", "fix: set NCCL_SOCKET_IFNAME=net1"}},
		},
		{
			name: "no IPC_LOCK and a 64 KiB memlock", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				noIPCLock(f.Pod)
				f.Exec[SecStatus] = statusDefault
				f.Exec[SecMemlock] = "64\n"
				return f
			},
			want: allOK(map[string]Status{IDCapIPCLock: Problem, IDMemlock: Problem}),
			evidence: map[string][]string{
				IDCapIPCLock: {"CapEff 00000000a80425fb lacks CAP_IPC_LOCK", "fix: add IPC_LOCK to spec.containers[trainer].securityContext.capabilities.add"},
				IDMemlock:    {"64 KiB without CAP_IPC_LOCK"},
			},
		},
		{
			name: "memlock limited but CAP_IPC_LOCK lifts it", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecMemlock] = "8192\n"
				return f
			},
			want:     allOK(nil),
			evidence: map[string][]string{IDMemlock: {"8192 KiB, lifted by CAP_IPC_LOCK"}},
		},
		{
			name: "pod without net1", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecLink] = strings.Split(f.Exec[SecLink], "47: net1")[0]
				f.Exec[SecAddr] = strings.Split(f.Exec[SecAddr], "47: net1")[0]
				f.Exec[SecIB] = "" // the CNI failed before the rdma step: no VF device either
				return f
			},
			want:     allOK(map[string]Status{IDTrainingIf: Problem, IDRDMADevice: Problem, IDNCCLSocketIfname: Problem, IDNCCLIBHCA: Problem, IDRoCEGID: Skip, IDNCCLGIDIndex: Skip}),
			evidence: map[string][]string{IDTrainingIf: {"the pod has no net1 (interfaces: lo, eth0)"}},
		},
		{
			name: "pod without the networks annotation", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				delete(f.Pod.Annotations, "k8s.v1.cni.cncf.io/networks")
				delete(f.Pod.Annotations, NetworkStatusAnnotation)
				f.NADs = map[string]*NAD{}
				return f
			},
			want: allOK(map[string]Status{IDNADExists: Problem, IDNADResource: Skip, IDNetworkStatus: Skip, IDDeviceInfo: Skip, IDTrainingIf: Skip, IDDefaultRoute: Skip}),
		},
		{
			name: "default route via net1", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecRoute] = "default via 192.168.100.1 dev net1 \n10.244.1.0/24 dev eth0 scope link  src 10.244.1.5 \n192.168.100.0/24 dev net1 scope link  src 192.168.100.12 \n"
				return f
			},
			want:     allOK(map[string]Status{IDDefaultRoute: Problem}),
			evidence: map[string][]string{IDDefaultRoute: {"default via 192.168.100.1 dev net1", "fix: drop \"gateway\""}},
		},
		{
			name: "wrong GID index (the RoCEv2 link-local one)", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecEnv1] = strings.Replace(f.Exec[SecEnv1], "NCCL_IB_GID_INDEX=3", "NCCL_IB_GID_INDEX=1", 1)
				return f
			},
			want:     allOK(map[string]Status{IDNCCLGIDIndex: Problem}),
			evidence: map[string][]string{IDNCCLGIDIndex: {"NCCL_IB_GID_INDEX=1 but the RoCEv2 IPv4 GID is at index 3", "fix: set NCCL_IB_GID_INDEX=3"}},
		},
		{
			name: "shared pod with the host's GID index", mode: ModeShared,
			facts: func() *Facts {
				f := sharedFacts()
				f.Exec[SecEnv1] = strings.Replace(f.Exec[SecEnv1], "NCCL_IB_GID_INDEX=5", "NCCL_IB_GID_INDEX=3", 1)
				return f
			},
			want: allOK(map[string]Status{IDDeviceInfo: Skip, IDNCCLGIDIndex: Problem}),
		},
		{
			name: "env exported by the training script wins over the spec's", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecEnv] = strings.Replace(f.Exec[SecEnv], "NCCL_IB_GID_INDEX=3", "NCCL_IB_GID_INDEX=0", 1)
				return f
			},
			want: allOK(nil),
		},
		{
			name: "no /proc/1/environ: the exec'd env is checked", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecEnv1] = ""
				f.Exec[SecEnv] = strings.Replace(f.Exec[SecEnv], "NCCL_IB_HCA=mlx5_3", "NCCL_IB_HCA=mlx5_0", 1)
				return f
			},
			want:     allOK(map[string]Status{IDNCCLIBHCA: Problem}),
			evidence: map[string][]string{IDNCCLIBHCA: {"NCCL_IB_HCA=mlx5_0 selects no RDMA device of the pod (has: mlx5_3)"}},
		},
		{
			name: "NCCL_IB_DISABLE=1 exported by the training script", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecEnv1] += "NCCL_IB_DISABLE=1\n"
				return f
			},
			want: allOK(map[string]Status{IDNCCLTransport: Problem}),
		},
		{
			name: "no RDMA device and no /dev/infiniband in the pod", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecIB] = ""
				f.Exec[SecDevInf] = ""
				return f
			},
			want: allOK(map[string]Status{IDRDMADevice: Problem, IDDevInfiniband: Problem, IDRoCEGID: Skip, IDNCCLGIDIndex: Skip, IDNCCLIBHCA: Problem}),
			evidence: map[string][]string{
				IDRDMADevice: {"no RDMA device under /sys/class/infiniband", "exclusive netns mode"},
			},
		},
		{
			name: "network-status lacks device-info and the NAD its resourceName", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Pod.Annotations[NetworkStatusAnnotation] = strings.Replace(exclusiveStatus, `,"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:02.1","rdma-device":"mlx5_3"}}`, "", 1)
				n := exclusiveNAD()
				delete(n["metadata"].(map[string]any)["annotations"].(map[string]any), "k8s.v1.cni.cncf.io/resourceName")
				f.NADs["ai-training/face-training-rdma"] = nadFrom(n)
				return f
			},
			want: allOK(map[string]Status{IDDeviceInfo: Problem, IDNADResource: Problem}),
		},
		{
			name: "network-status without the NAD's entry", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Pod.Annotations[NetworkStatusAnnotation] = `[{"name":"k8s-pod-network","interface":"eth0","ips":["10.244.1.5"],"default":true}]`
				return f
			},
			want:     allOK(map[string]Status{IDNetworkStatus: Problem, IDDeviceInfo: Skip}),
			evidence: map[string][]string{IDNetworkStatus: {"network-status has no entry for ai-training/face-training-rdma (has: k8s-pod-network)"}},
		},
		{
			name: "node lost the pool", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Node.Status.Allocatable["example.com/sriov_rdma"] = resource.MustParse("0")
				return f
			},
			want: allOK(map[string]Status{IDNodeResource: Problem}),
		},
		{
			name: "DRA-only node: allocatable 0, the resource served by an extended-resource claim", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Node.Status.Allocatable["example.com/sriov_rdma"] = resource.MustParse("0")
				f.Pod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "face-trainer-0-extended-resources-x7k2p",
					RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "trainer", ResourceName: "example.com/sriov_rdma", RequestName: "container-0-request-0"}}}
				return f
			},
			want:     allOK(nil),
			evidence: map[string][]string{IDNodeResource: {"example.com/sriov_rdma (1) is served through DRA: extended-resource ResourceClaim ai-training/face-trainer-0-extended-resources-x7k2p"}},
		},
		{
			name: "VF from a DRA claim instead of limits", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				for i := range f.Pod.Spec.Containers {
					delete(f.Pod.Spec.Containers[i].Resources.Limits, "example.com/sriov_rdma")
					delete(f.Pod.Spec.Containers[i].Resources.Requests, "example.com/sriov_rdma")
				}
				name := "face-trainer-0-rdma-abcde"
				f.Pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "rdma", ResourceClaimName: &name}}
				return f
			},
			want: allOK(nil),
			evidence: map[string][]string{IDNodeResource: {"gets devices through DRA ResourceClaims face-trainer-0-rdma-abcde"},
				IDNADResource: {"the pod's devices come from DRA ResourceClaims face-trainer-0-rdma-abcde"}},
		},
		{
			name: "node does not offer the resource", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
				return f
			},
			want:     allOK(map[string]Status{IDNodeResource: Problem}),
			evidence: map[string][]string{IDNodeResource: {"does not offer example.com/sriov_rdma at all"}},
		},
		{
			name: "exec refused", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec, f.ExecErr = nil, errors.New("pods \"face-trainer-0\" is forbidden: cannot create resource \"pods/exec\"")
				return f
			},
			want: map[string]Status{IDNodeResource: OK, IDNADExists: OK, IDNADResource: OK, IDNetworkStatus: OK, IDDeviceInfo: OK, IDExec: Unknown, IDNCCLLog: Skip},
		},
		{
			name: "pending pod", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Pod.Spec.NodeName = ""
				f.Pod.Status.Phase = corev1.PodPending
				delete(f.Pod.Annotations, NetworkStatusAnnotation)
				f.Exec, f.ExecErr = nil, errors.New("pod is Pending, not Running")
				return f
			},
			want:     map[string]Status{IDNodeResource: Problem, IDNADExists: OK, IDNADResource: OK, IDNetworkStatus: Problem, IDDeviceInfo: Skip, IDExec: Unknown, IDNCCLLog: Skip},
			evidence: map[string][]string{IDExec: {"fix: the pod is Pending"}},
		},
		{
			name: "NCCL log shows NET/IB", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.LogsWanted, f.Logs = true, ibLog
				return f
			},
			want:     allOK(map[string]Status{IDNCCLLog: OK}),
			evidence: map[string][]string{IDNCCLLog: {"NCCL used NET/IB", "mlx5_3:1", "GPUDirect RDMA yes"}},
		},
		{
			name: "NCCL log shows the socket fallback", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.LogsWanted, f.Logs = true, socketLog
				return f
			},
			want:     allOK(map[string]Status{IDNCCLLog: Problem}),
			evidence: map[string][]string{IDNCCLLog: {"transport Socket"}},
		},
		{
			name: "NCCL log shows an RDMA network plugin", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.LogsWanted, f.Logs = true, strings.ReplaceAll(strings.ReplaceAll(ibLog, "Using network IB", "Using network IBext_v8"), "NET/IB/0", "NET/IBext_v8/0")
				return f
			},
			want:     allOK(map[string]Status{IDNCCLLog: OK}),
			evidence: map[string][]string{IDNCCLLog: {"RDMA network plugin IBext_v8", "GPUDirect RDMA yes"}},
		},
		{
			name: "NCCL log: IB disabled or failed, sockets", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.LogsWanted = true
				f.Logs = "a-0:1:2 [0] NCCL INFO transport/net_ib.cc:852 -> 3\na-0:1:2 [0] NCCL INFO Using network Socket\na-0:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0\n"
				return f
			},
			want:     allOK(map[string]Status{IDNCCLLog: Unknown}),
			evidence: map[string][]string{IDNCCLLog: {"NCCL did not use RDMA", "IB was disabled or failed to initialise"}},
		},
		{
			name: "NCCL log without NET lines", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.LogsWanted, f.Logs = true, "epoch 1 loss 0.42\n"
				return f
			},
			want: allOK(map[string]Status{IDNCCLLog: Unknown}),
		},
		{
			name: "NCCL log unreadable", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.LogsWanted, f.LogsErr = true, errors.New("forbidden")
				return f
			},
			want: allOK(map[string]Status{IDNCCLLog: Unknown}),
		},
		{
			name: "shared pod: no RoCEv2 GID for net1's address", mode: ModeShared,
			facts: func() *Facts {
				f := sharedFacts()
				f.Exec[SecIB] = strings.Split(f.Exec[SecIB], "gid mlx5_0 1 4")[0]
				return f
			},
			want:     allOK(map[string]Status{IDDeviceInfo: Skip, IDRoCEGID: Problem, IDNCCLGIDIndex: Skip}),
			evidence: map[string][]string{IDRoCEGID: {"no RoCEv2 GID carries net1's address 192.168.100.21 (RoCEv2 IPv4 GIDs: 3=192.168.1.10)"}},
		},
		{
			name: "InfiniBand port: no GID index", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecIB] = "dev mlx5_3 net1\nport mlx5_3 1 InfiniBand 4: ACTIVE\ngid mlx5_3 1 0 fe80:0000:0000:0000:0c42:a103:0065:2f10 net1 IB/RoCE v1\n"
				return f
			},
			// NCCL_IB_GID_INDEX=3 is set: harmless on IB, and said so
			want:     allOK(map[string]Status{IDRoCEGID: Skip}),
			evidence: map[string][]string{IDNCCLGIDIndex: {"NCCL_IB_GID_INDEX=3 is ignored on InfiniBand"}},
		},
		{
			name: "training interface down", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				f.Exec[SecLink] = strings.Replace(f.Exec[SecLink], "47: net1: <BROADCAST,MULTICAST,UP,LOWER_UP>", "47: net1: <BROADCAST,MULTICAST>", 1)
				return f
			},
			want:     allOK(map[string]Status{IDTrainingIf: Problem}),
			evidence: map[string][]string{IDTrainingIf: {"net1 is down"}},
		},
		{
			name: "pod requests no RDMA resource", mode: ModeExclusive,
			facts: func() *Facts {
				f := exclusiveFacts()
				delete(f.Pod.Spec.Containers[1].Resources.Limits, "example.com/sriov_rdma")
				delete(f.Pod.Spec.Containers[1].Resources.Requests, "example.com/sriov_rdma")
				return f
			},
			want: allOK(map[string]Status{IDNodeResource: Problem, IDNADResource: Problem}),
		},
		{
			name: "NCCL_IB_DISABLE=1 in the pod spec", mode: ModeTCP,
			facts: func() *Facts {
				f := exclusiveFacts()
				c := &f.Pod.Spec.Containers[1]
				c.Env = append(c.Env, corev1.EnvVar{Name: "NCCL_IB_DISABLE", Value: "1"})
				f.Exec[SecEnv1] += "NCCL_IB_DISABLE=1\n"
				return f
			},
			want: allOK(map[string]Status{IDNCCLTransport: Problem, IDDeviceInfo: Skip}),
		},
	}
}

func TestRun(t *testing.T) {
	for _, tt := range runCases() {
		t.Run(tt.name, func(t *testing.T) {
			rep := Run(tt.facts())
			if rep.Mode != tt.mode {
				t.Errorf("mode %q, want %q (evidence %q)", rep.Mode, tt.mode, rep.ModeEvidence)
			}
			got := map[string]Status{}
			for _, c := range rep.Checks {
				if _, dup := got[c.ID]; dup {
					t.Errorf("check %s reported twice", c.ID)
				}
				got[c.ID] = c.Status
				if (c.Status == Problem || c.Status == Unknown) && c.Evidence == "" {
					t.Errorf("%s %s without evidence", c.ID, c.Status)
				}
				if c.Status == Problem && c.Fix == "" {
					t.Errorf("%s problem without a fix: %s", c.ID, c.Evidence)
				}
			}
			if diff := statusDiff(got, tt.want); diff != "" {
				t.Errorf("statuses differ (got vs want):\n%s\nchecks:\n%s", diff, dump(rep))
			}
			for id, subs := range tt.evidence {
				var text string
				for _, c := range rep.Checks {
					if c.ID == id {
						text = c.Evidence + " fix: " + c.Fix
					}
				}
				for _, s := range subs {
					if !strings.Contains(text, s) {
						t.Errorf("%s: %q does not contain %q", id, text, s)
					}
				}
			}
			wantRes := OK
			for _, s := range tt.want {
				if s == Unknown {
					wantRes = Unknown
				}
			}
			for _, s := range tt.want {
				if s == Problem {
					wantRes = Problem
				}
			}
			if rep.Summary.Result != string(wantRes) {
				t.Errorf("result %q, want %q", rep.Summary.Result, wantRes)
			}
		})
	}
}

// TestCatalogueCoverage fails when a check of the catalogue lacks a case
// where it is OK or one where it is not (problem, or unknown for exec).
func TestCatalogueCoverage(t *testing.T) {
	seen := map[string]map[Status]bool{}
	for _, tt := range runCases() {
		for id, st := range tt.want {
			if seen[id] == nil {
				seen[id] = map[Status]bool{}
			}
			seen[id][st] = true
		}
	}
	for _, c := range Catalogue {
		t.Run(c.ID, func(t *testing.T) {
			if !seen[c.ID][OK] {
				t.Errorf("no TestRun case where %s is ok", c.ID)
			}
			if !seen[c.ID][Problem] && !seen[c.ID][Unknown] {
				t.Errorf("no TestRun case where %s finds a problem", c.ID)
			}
		})
	}
}

func statusDiff(got, want map[string]Status) string {
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var out []string
	for k := range keys {
		if got[k] != want[k] {
			out = append(out, fmt.Sprintf("  %s: %q vs %q", k, got[k], want[k]))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func dump(r *Report) string {
	var b strings.Builder
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "  %s %s %s: %s\n", c.Layer, c.ID, c.Status, c.Evidence)
	}
	return b.String()
}

// TestCatalogueOrder checks that Run reports checks in catalogue order and
// layers in Layers order.
func TestCatalogueOrder(t *testing.T) {
	tests := []struct {
		name  string
		facts func() *Facts
	}{
		{"exclusive", exclusiveFacts},
		{"host", hostFacts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Run(tt.facts())
			pos := map[string]int{}
			layer := map[string]string{}
			for i, c := range Catalogue {
				pos[c.ID] = i
				layer[c.ID] = c.Layer
			}
			last := -1
			for _, c := range rep.Checks {
				if pos[c.ID] < last {
					t.Errorf("check %s out of catalogue order", c.ID)
				}
				last = pos[c.ID]
				if layer[c.ID] != c.Layer {
					t.Errorf("check %s in layer %s, catalogue says %s", c.ID, c.Layer, layer[c.ID])
				}
			}
		})
	}
}
