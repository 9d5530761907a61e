package verifytest

// InfiniBand pods on the IB test node (internal/sysfsfixture NewIBNode):
// exclusive (an ib-sriov VF of mlx5_1's port, PKey 0x8005), shared (an
// IPoIB child of ibp193s0f1 on mlx5_2, PKey 0x8006) and IB-only (a VF of
// the IB-only PF, no netdev), and what busybox prints inside them.

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

const (
	IBVFResource     = "rdmanet.io/ib_vf"
	IBSharedResource = "rdmanet.io/hca_shared_ib"
	IBOnlyResource   = "rdmanet.io/ib_only"
)

const IBSRIOVConfig = `{"cniVersion":"1.0.0","name":"ib-training","plugins":[{"type":"ib-sriov","pkey":"0x8005","link_state":"enable","capabilities":{"infinibandGUID":true},"ipam":{"type":"rdmanet-ipam","range":"192.168.200.0/24"}},{"type":"rdma"}]}`
const IPoIBConfig = `{"cniVersion":"1.0.0","name":"ib-shared","type":"ipoib","master":"ibp193s0f1","pkey":"0x8006","ipam":{"type":"rdmanet-ipam","range":"192.168.210.0/24"}}`
const IBOnlyConfig = `{"cniVersion":"1.0.0","name":"ib-only","type":"ib-sriov","pkey":"0x8005","rdmaIsolation":true}`

func IBExclusiveNAD() map[string]any { return NADObject("ib-training", IBVFResource, IBSRIOVConfig) }
func IBSharedNAD() map[string]any    { return NADObject("ib-shared", IBSharedResource, IPoIBConfig) }
func IBOnlyNAD() map[string]any      { return NADObject("ib-only", IBOnlyResource, IBOnlyConfig) }

// The ib-sriov result's interface carries the GUID as its mac; an IB-only
// attachment is named after its RDMA device and has no IPs.
const IBExclusiveStatus = `[{"name":"k8s-pod-network","interface":"eth0","ips":["10.244.1.7"],"default":true,"dns":{}},` +
	`{"name":"ai-training/ib-training","interface":"net1","ips":["192.168.200.12"],"mac":"02:00:00:00:00:00:00:05","dns":{},` +
	`"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:c1:00.2","rdma-device":"mlx5_4"}}}]`
const IBSharedStatus = `[{"name":"k8s-pod-network","interface":"eth0","ips":["10.244.1.8"],"default":true,"dns":{}},` +
	`{"name":"ai-training/ib-shared","interface":"net1","ips":["192.168.210.21"],"dns":{}}]`
const IBOnlyStatus = `[{"name":"k8s-pod-network","interface":"eth0","ips":["10.244.1.9"],"default":true,"dns":{}},` +
	`{"name":"ai-training/ib-only","interface":"mlx5_8","mac":"02:00:00:00:00:00:01:01","dns":{},` +
	`"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:d1:00.2","rdma-device":"mlx5_8"}}}]`

var IBExclusiveEnv = map[string]string{"NCCL_SOCKET_IFNAME": "net1", "NCCL_IB_HCA": "mlx5", "NCCL_DEBUG": "INFO"}
var IBSharedEnv = map[string]string{"NCCL_SOCKET_IFNAME": "net1", "NCCL_IB_HCA": "=mlx5_2", "NCCL_DEBUG": "INFO"}
var IBOnlyEnv = map[string]string{"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"}

func IBExclusivePod(opts ...PodOpt) *corev1.Pod {
	o := append([]PodOpt{WithAnn("k8s.v1.cni.cncf.io/networks", "ib-training@net1"), WithAnn("k8s.v1.cni.cncf.io/network-status", IBExclusiveStatus)}, opts...)
	return BasePod("ib-trainer-0", map[string]string{IBVFResource: "1", "nvidia.com/gpu": "8"}, IBExclusiveEnv, o...)
}

func IBSharedPod(opts ...PodOpt) *corev1.Pod {
	o := append([]PodOpt{WithAnn("k8s.v1.cni.cncf.io/networks", "ib-shared@net1"), WithAnn("k8s.v1.cni.cncf.io/network-status", IBSharedStatus)}, opts...)
	return BasePod("ib-trainer-shared-0", map[string]string{IBSharedResource: "1", "nvidia.com/gpu": "8"}, IBSharedEnv, o...)
}

func IBOnlyPod(opts ...PodOpt) *corev1.Pod {
	o := append([]PodOpt{WithAnn("k8s.v1.cni.cncf.io/networks", "ib-only@net1"), WithAnn("k8s.v1.cni.cncf.io/network-status", IBOnlyStatus)}, opts...)
	return BasePod("ib-trainer-only-0", map[string]string{IBOnlyResource: "1", "nvidia.com/gpu": "8"}, IBOnlyEnv, o...)
}

// IBPortLines is what the in-pod script prints for an InfiniBand port:
// link layer and state, LID and SM LID, the PKey table's slots (empty
// slots included, as sysfs has them) and GID 0 (the port GUID).
func IBPortLines(dev, state, lid, smLID string, pkeys []string, gid0 string) string {
	var slots []string // nil pkeys: the table is unreadable (no slot printed)
	if pkeys != nil {
		slots = append(append(slots, pkeys...), "0x0000", "0x0000", "0x0000")
	}
	return "port " + dev + " 1 InfiniBand " + state + "\n" +
		"ibport " + dev + " 1 " + lid + " " + smLID + "\n" +
		strings.TrimSpace("pkeys "+dev+" 1 "+strings.Join(slots, " ")) + "\n" +
		"gid " + dev + " 1 0 " + gid0 + " - IB/RoCE v1\n"
}

const ibLinkEth0 = `3: eth0@if16: <BROADCAST,MULTICAST,UP,LOWER_UP,M-DOWN> mtu 1450 qdisc noqueue \    link/ether 0a:58:0a:f4:01:07 brd ff:ff:ff:ff:ff:ff
`

func ibCommon(env map[string]string, devinf string) map[string]string {
	return map[string]string{"devinf": devinf, "status": StatusIPCLock, "memlock": "unlimited\n", "env": EnvOut(env), "env1": EnvOut(env)}
}

// IBExclusiveExec: the VF's IPoIB netdev is net1 and its RDMA device
// mlx5_4 is the only one the pod sees (RDMA subsystem in exclusive mode).
func IBExclusiveExec() map[string]string {
	m := ibCommon(IBExclusiveEnv, "rdma_cm\numad4\nuverbs4\n")
	m["link"] = LoLink + ibLinkEth0 + `48: net1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq qlen 256\    link/infiniband 00:00:10:29:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:00:05 brd 00:ff:ff:ff:ff:12:40:1b:80:05:00:00:00:00:00:00:ff:ff:ff:ff
`
	m["addr"] = LoAddr + `3: eth0    inet 10.244.1.7/24 brd 10.244.1.255 scope global eth0\       valid_lft forever preferred_lft forever
48: net1    inet 192.168.200.12/24 brd 192.168.200.255 scope global net1\       valid_lft forever preferred_lft forever
`
	m["route"] = "default via 10.244.1.1 dev eth0 \n10.244.1.0/24 dev eth0 scope link  src 10.244.1.7 \n192.168.200.0/24 dev net1 scope link  src 192.168.200.12 \n"
	m["ib"] = "dev mlx5_4 net1\n" + IBPortLines("mlx5_4", "4: ACTIVE", "0x14", "0x1", []string{"0xffff", "0x8005"}, "fe80:0000:0000:0000:0200:0000:0000:0005")
	return m
}

// IBSharedExec: the IPoIB child net1 of ibp193s0f1; in shared netns mode
// the pod sees every HCA of the node, net1 under mlx5_2.
func IBSharedExec() map[string]string {
	m := ibCommon(IBSharedEnv, "rdma_cm\numad1\numad2\nuverbs1\nuverbs2\n")
	m["link"] = LoLink + ibLinkEth0 + `5: net1@if7: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq qlen 256\    link/infiniband 00:00:11:29:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:65:8e:82 brd 00:ff:ff:ff:ff:12:40:1b:80:06:00:00:00:00:00:00:ff:ff:ff:ff
`
	m["addr"] = LoAddr + `3: eth0    inet 10.244.1.8/24 brd 10.244.1.255 scope global eth0\       valid_lft forever preferred_lft forever
5: net1    inet 192.168.210.21/24 brd 192.168.210.255 scope global net1\       valid_lft forever preferred_lft forever
`
	m["route"] = "default via 10.244.1.1 dev eth0 \n10.244.1.0/24 dev eth0 scope link  src 10.244.1.8 \n192.168.210.0/24 dev net1 scope link  src 192.168.210.21 \n"
	m["ib"] = "dev mlx5_1\n" + IBPortLines("mlx5_1", "4: ACTIVE", "0x11", "0x1", []string{"0xffff", "0x8005"}, "fe80:0000:0000:0000:0c42:a103:0065:8e81") +
		"dev mlx5_2 net1\n" + IBPortLines("mlx5_2", "4: ACTIVE", "0x12", "0x1", []string{"0xffff", "0x8005", "0x8006"}, "fe80:0000:0000:0000:0c42:a103:0065:8e82")
	return m
}

// IBOnlyExec: a VF of the IB-only PF: its RDMA device and uverbs node, no
// netdev (no net1).
func IBOnlyExec() map[string]string {
	m := ibCommon(IBOnlyEnv, "rdma_cm\numad8\nuverbs8\n")
	m["link"] = LoLink + ibLinkEth0
	m["addr"] = LoAddr + "3: eth0    inet 10.244.1.9/24 brd 10.244.1.255 scope global eth0\\       valid_lft forever preferred_lft forever\n"
	m["route"] = "default via 10.244.1.1 dev eth0 \n10.244.1.0/24 dev eth0 scope link  src 10.244.1.9 \n"
	m["ib"] = "dev mlx5_8\n" + IBPortLines("mlx5_8", "4: ACTIVE", "0x15", "0x1", []string{"0xffff", "0x8005"}, "fe80:0000:0000:0000:0200:0000:0000:0101")
	return m
}
