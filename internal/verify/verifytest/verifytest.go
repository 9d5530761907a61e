// Package verifytest holds real-looking fixtures for `kubectl rdma verify`:
// pods, NADs and a node for the exclusive, shared and hostNetwork modes of
// the seeds, and what busybox prints inside such pods (by section of
// verify.Script). The unit, command and apiserver tests share them; the
// cluster tier can compare a real pod's output with them.
package verifytest

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Builders of real-looking pods, NADs, nodes and busybox outputs for the
// three modes of the seeds: exclusive (SR-IOV VF per pod), shared (macvlan
// on a shared HCA) and host (hostNetwork).

const (
	NS       = "ai-training"
	NodeName = "gpu-node-a"
)

type PodOpt func(*corev1.Pod)

func BasePod(name string, limits map[string]string, env map[string]string, opts ...PodOpt) *corev1.Pod {
	rl := corev1.ResourceList{}
	for k, v := range limits {
		rl[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	var ev []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(env)) {
		ev = append(ev, corev1.EnvVar{Name: k, Value: env[k]})
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS, Annotations: map[string]string{}, Labels: map[string]string{"app": "face-trainer"}},
		Spec: corev1.PodSpec{
			NodeName: NodeName,
			Containers: []corev1.Container{
				{Name: "sidecar", Image: "busybox"},
				{Name: "trainer", Image: "busybox", Command: []string{"sleep", "infinity"}, Env: ev,
					Resources:       corev1.ResourceRequirements{Limits: rl, Requests: rl},
					SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"IPC_LOCK"}}}},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func WithAnn(k, v string) PodOpt { return func(p *corev1.Pod) { p.Annotations[k] = v } }

// WithLabel sets a label.
func WithLabel(k, v string) PodOpt { return func(p *corev1.Pod) { p.Labels[k] = v } }

func HostNet(p *corev1.Pod) {
	p.Spec.HostNetwork = true
	p.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
}

func NoIPCLock(p *corev1.Pod) { p.Spec.Containers[1].SecurityContext = nil }

const ExclusiveStatus = `[{"name":"k8s-pod-network","interface":"eth0","ips":["10.244.1.5"],"mac":"0a:58:0a:f4:01:05","default":true,"dns":{}},` +
	`{"name":"ai-training/face-training-rdma","interface":"net1","ips":["192.168.100.12"],"mac":"62:1b:8e:5d:0a:31","dns":{},` +
	`"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:02.1","rdma-device":"mlx5_3"}}}]`

const SharedStatus = `[{"name":"k8s-pod-network","interface":"eth0","ips":["10.244.1.6"],"default":true,"dns":{}},` +
	`{"name":"ai-training/face-training-shared","interface":"net1","ips":["192.168.100.21"],"mac":"2e:91:4c:10:77:02","dns":{}}]`

var ExclusiveEnv = map[string]string{"NCCL_SOCKET_IFNAME": "net1", "NCCL_IB_HCA": "mlx5_3", "NCCL_IB_GID_INDEX": "3", "NCCL_DEBUG": "INFO"}
var SharedEnv = map[string]string{"NCCL_SOCKET_IFNAME": "net1", "NCCL_IB_HCA": "mlx5_0", "NCCL_IB_GID_INDEX": "5", "NCCL_DEBUG": "INFO"}
var HostEnv = map[string]string{"NCCL_SOCKET_IFNAME": "ens1f0", "NCCL_IB_HCA": "=mlx5_0", "NCCL_IB_GID_INDEX": "3"}

func ExclusivePod(opts ...PodOpt) *corev1.Pod {
	o := append([]PodOpt{WithAnn("k8s.v1.cni.cncf.io/networks", "face-training-rdma@net1"), WithAnn("k8s.v1.cni.cncf.io/network-status", ExclusiveStatus)}, opts...)
	return BasePod("face-trainer-0", map[string]string{"example.com/sriov_rdma": "1", "nvidia.com/gpu": "8"}, ExclusiveEnv, o...)
}

func SharedPod(opts ...PodOpt) *corev1.Pod {
	o := append([]PodOpt{WithAnn("k8s.v1.cni.cncf.io/networks", `[{"name":"face-training-shared","interface":"net1"}]`), WithAnn("k8s.v1.cni.cncf.io/network-status", SharedStatus)}, opts...)
	return BasePod("face-trainer-shared-0", map[string]string{"rdma/hca_shared_devices_a": "1", "nvidia.com/gpu": "8"}, SharedEnv, o...)
}

func HostPod(opts ...PodOpt) *corev1.Pod {
	return BasePod("face-trainer-host-0", map[string]string{"rdma/hca_shared_devices_a": "1", "nvidia.com/gpu": "8"}, HostEnv, append([]PodOpt{HostNet}, opts...)...)
}

func NADObject(name, resourceName, config string) map[string]any {
	ann := map[string]any{}
	if resourceName != "" {
		ann["k8s.v1.cni.cncf.io/resourceName"] = resourceName
	}
	return map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": name, "namespace": NS, "annotations": ann},
		"spec":     map[string]any{"config": config},
	}
}

const SRIOVConfig = `{"cniVersion":"1.0.0","name":"face-training-rdma","plugins":[{"type":"sriov","ipam":{"type":"whereabouts","range":"192.168.100.0/24"}},{"type":"rdma"}]}`
const MacvlanConfig = `{"cniVersion":"1.0.0","name":"face-training-shared","plugins":[{"type":"macvlan","master":"ens1f0","mode":"bridge","ipam":{"type":"whereabouts","range":"192.168.100.0/24"}}]}`

func ExclusiveNAD() map[string]any {
	return NADObject("face-training-rdma", "example.com/sriov_rdma", SRIOVConfig)
}
func SharedNAD() map[string]any {
	return NADObject("face-training-shared", "rdma/hca_shared_devices_a", MacvlanConfig)
}

func NodeObj() *corev1.Node {
	q := corev1.ResourceList{
		"example.com/sriov_rdma":    resource.MustParse("8"),
		"rdma/hca_shared_devices_a": resource.MustParse("64"),
		"nvidia.com/gpu":            resource.MustParse("8"),
		IBVFResource:                resource.MustParse("4"),
		IBSharedResource:            resource.MustParse("64"),
		IBOnlyResource:              resource.MustParse("2"),
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName}, Status: corev1.NodeStatus{Capacity: q, Allocatable: q.DeepCopy()}}
}

// busybox outputs, as `ip -o ...` of busybox 1.36 prints them.

const LoLink = `1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue qlen 1000\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
`
const LoAddr = `1: lo    inet 127.0.0.1/8 scope host lo\       valid_lft forever preferred_lft forever
`

const StatusIPCLock = "CapInh:\t0000000000000000\nCapPrm:\t00000000a80465fb\nCapEff:\t00000000a80465fb\nCapBnd:\t00000000a80465fb\nCapAmb:\t0000000000000000\n"
const StatusDefault = "CapInh:\t0000000000000000\nCapPrm:\t00000000a80425fb\nCapEff:\t00000000a80425fb\nCapBnd:\t00000000a80425fb\nCapAmb:\t0000000000000000\n"

func EnvOut(env map[string]string) string {
	var b strings.Builder
	b.WriteString("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nHOSTNAME=face-trainer-0\n")
	for _, k := range slices.Sorted(maps.Keys(env)) {
		b.WriteString(k + "=" + env[k] + "\n")
	}
	b.WriteString("HOME=/root\n")
	return b.String()
}

func ExclusiveExec() map[string]string {
	return map[string]string{
		"link": LoLink + `3: eth0@if14: <BROADCAST,MULTICAST,UP,LOWER_UP,M-DOWN> mtu 1450 qdisc noqueue \    link/ether 0a:58:0a:f4:01:05 brd ff:ff:ff:ff:ff:ff
47: net1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq qlen 1000\    link/ether 62:1b:8e:5d:0a:31 brd ff:ff:ff:ff:ff:ff
`,
		"addr": LoAddr + `3: eth0    inet 10.244.1.5/24 brd 10.244.1.255 scope global eth0\       valid_lft forever preferred_lft forever
47: net1    inet 192.168.100.12/24 brd 192.168.100.255 scope global net1\       valid_lft forever preferred_lft forever
47: net1    inet6 fe80::601b:8eff:fe5d:a31/64 scope link \       valid_lft forever preferred_lft forever
`,
		"route": `default via 10.244.1.1 dev eth0 
10.244.1.0/24 dev eth0 scope link  src 10.244.1.5 
192.168.100.0/24 dev net1 scope link  src 192.168.100.12 
`,
		"ib": `dev mlx5_3 net1
port mlx5_3 1 Ethernet 4: ACTIVE
gid mlx5_3 1 0 fe80:0000:0000:0000:601b:8eff:fe5d:0a31 net1 IB/RoCE v1
gid mlx5_3 1 1 fe80:0000:0000:0000:601b:8eff:fe5d:0a31 net1 RoCE v2
gid mlx5_3 1 2 0000:0000:0000:0000:0000:ffff:c0a8:640c net1 IB/RoCE v1
gid mlx5_3 1 3 0000:0000:0000:0000:0000:ffff:c0a8:640c net1 RoCE v2
`,
		"devinf":  "rdma_cm\nuverbs3\n",
		"status":  StatusIPCLock,
		"memlock": "unlimited\n",
		"env":     EnvOut(ExclusiveEnv),
		"env1":    EnvOut(ExclusiveEnv),
	}
}

func SharedExec() map[string]string {
	return map[string]string{
		"link": LoLink + `3: eth0@if15: <BROADCAST,MULTICAST,UP,LOWER_UP,M-DOWN> mtu 1450 qdisc noqueue \    link/ether 0a:58:0a:f4:01:06 brd ff:ff:ff:ff:ff:ff
4: net1@if2: <BROADCAST,MULTICAST,UP,LOWER_UP,M-DOWN> mtu 9000 qdisc noqueue \    link/ether 2e:91:4c:10:77:02 brd ff:ff:ff:ff:ff:ff
`,
		"addr": LoAddr + `3: eth0    inet 10.244.1.6/24 brd 10.244.1.255 scope global eth0\       valid_lft forever preferred_lft forever
4: net1    inet 192.168.100.21/24 brd 192.168.100.255 scope global net1\       valid_lft forever preferred_lft forever
`,
		"route": "default via 10.244.1.1 dev eth0 \n10.244.1.0/24 dev eth0 scope link  src 10.244.1.6 \n192.168.100.0/24 dev net1 scope link  src 192.168.100.21 \n",
		// Shared netns mode: the pod sees the whole HCA, its GID table
		// holds the PF's address (index 3) and every macvlan's (index 5
		// is this pod's).
		"ib": `dev mlx5_0
port mlx5_0 1 Ethernet 4: ACTIVE
gid mlx5_0 1 0 fe80:0000:0000:0000:0e42:a1ff:fe9e:5a10 - IB/RoCE v1
gid mlx5_0 1 1 fe80:0000:0000:0000:0e42:a1ff:fe9e:5a10 - RoCE v2
gid mlx5_0 1 2 0000:0000:0000:0000:0000:ffff:c0a8:010a - IB/RoCE v1
gid mlx5_0 1 3 0000:0000:0000:0000:0000:ffff:c0a8:010a - RoCE v2
gid mlx5_0 1 4 0000:0000:0000:0000:0000:ffff:c0a8:6415 - IB/RoCE v1
gid mlx5_0 1 5 0000:0000:0000:0000:0000:ffff:c0a8:6415 - RoCE v2
`,
		"devinf":  "rdma_cm\nuverbs0\n",
		"status":  StatusIPCLock,
		"memlock": "unlimited\n",
		"env":     EnvOut(SharedEnv),
		"env1":    EnvOut(SharedEnv),
	}
}

func HostExec() map[string]string {
	return map[string]string{
		"link": LoLink + `2: ens2f0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq qlen 1000\    link/ether 0c:42:a1:00:00:01 brd ff:ff:ff:ff:ff:ff
4: ens1f0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq qlen 1000\    link/ether 0c:42:a1:9e:5a:10 brd ff:ff:ff:ff:ff:ff
9: cni0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1450 qdisc noqueue qlen 1000\    link/ether 1a:2b:3c:4d:5e:6f brd ff:ff:ff:ff:ff:ff
`,
		"addr": LoAddr + `2: ens2f0    inet 10.0.0.21/24 brd 10.0.0.255 scope global ens2f0\       valid_lft forever preferred_lft forever
4: ens1f0    inet 192.168.1.10/24 brd 192.168.1.255 scope global ens1f0\       valid_lft forever preferred_lft forever
`,
		"route": "default via 10.0.0.1 dev ens2f0 \n10.0.0.0/24 dev ens2f0 scope link  src 10.0.0.21 \n192.168.1.0/24 dev ens1f0 scope link  src 192.168.1.10 \n",
		"ib": `dev mlx5_0 ens1f0
port mlx5_0 1 Ethernet 4: ACTIVE
gid mlx5_0 1 0 fe80:0000:0000:0000:0e42:a1ff:fe9e:5a10 ens1f0 IB/RoCE v1
gid mlx5_0 1 1 fe80:0000:0000:0000:0e42:a1ff:fe9e:5a10 ens1f0 RoCE v2
gid mlx5_0 1 2 0000:0000:0000:0000:0000:ffff:c0a8:010a ens1f0 IB/RoCE v1
gid mlx5_0 1 3 0000:0000:0000:0000:0000:ffff:c0a8:010a ens1f0 RoCE v2
`,
		"devinf":  "rdma_cm\nuverbs0\n",
		"status":  StatusIPCLock,
		"memlock": "unlimited\n",
		"env":     EnvOut(HostEnv),
		"env1":    EnvOut(HostEnv),
	}
}

const IBLog = `face-trainer-0:41:41 [0] NCCL INFO Bootstrap : Using net1:192.168.100.12<0>
NCCL version 2.21.5+cuda12.4
face-trainer-0:41:97 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to net1
face-trainer-0:41:97 [0] NCCL INFO NET/IB : Using [0]mlx5_3:1/RoCE [RO]; OOB net1:192.168.100.12<0>
face-trainer-0:41:97 [0] NCCL INFO Using network IB
face-trainer-0:41:97 [0] NCCL INFO comm 0x0f2a52e6b438 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x5e3b9c07a41d2f68 - Init START
face-trainer-0:41:97 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
`

const SocketLog = `face-trainer-0:41:41 [0] NCCL INFO Bootstrap : Using net1:192.168.100.12<0>
NCCL version 2.21.5+cuda12.4
face-trainer-0:41:97 [0] NCCL INFO NET/IB : No device found.
face-trainer-0:41:97 [0] NCCL INFO NET/Socket : Using [0]net1:192.168.100.12<0>
face-trainer-0:41:97 [0] NCCL INFO Using network Socket
face-trainer-0:41:97 [0] NCCL INFO comm 0x0f2a52e6b438 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x5e3b9c07a41d2f68 - Init START
face-trainer-0:41:97 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
`
