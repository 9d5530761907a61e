package cluster

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/rdmanet/rdmanet/internal/netops"
)

// component is one long-running process of the node.
type component struct {
	name string
	bin  string // under Layout.Bin()
	args []string
	env  []string // added to the supervisor's environment
	// health is a URL the supervisor polls from inside the node (https
	// with the admin client certificate), or a unix socket path ("unix:").
	health string
}

// simEnv is what the node's CNI binaries need on a machine without SR-IOV
// and RDMA: the fixture's sysfs and the recording fake for VF-through-PF and
// RDMA netns operations (honoured only by the simulated-node build, tag
// rdmanet_testhooks). containerd passes its environment to the CNI binaries
// it execs (the shim's per-call fallback); the overlay gives the daemon
// container the same.
var simEnv = []string{
	"RDMANET_SYSFS_ROOT=/var/lib/rdmanet-sim/sys",
	"RDMANET_NETOPS=record",
	"RDMANET_NETOPS_STATE=/var/lib/rdmanet/netops-record.json",
}

// components returns the node's processes in start order.
func components(l Layout) []component {
	pki := func(f string) string { return filepath.Join(l.PKI(), f) }
	api := fmt.Sprintf("https://%s:%d", NodeIP, APIPort)
	kc := func(id string) string { return pki(id + ".kubeconfig") }
	return []component{
		{
			name: "etcd", bin: "etcd",
			args: []string{
				"--name=" + NodeName,
				"--data-dir=" + l.Etcd(),
				"--listen-client-urls=http://127.0.0.1:" + strconv.Itoa(EtcdPort),
				"--advertise-client-urls=http://127.0.0.1:" + strconv.Itoa(EtcdPort),
				"--listen-peer-urls=http://127.0.0.1:2380",
				"--initial-advertise-peer-urls=http://127.0.0.1:2380",
				"--initial-cluster=" + NodeName + "=http://127.0.0.1:2380",
				"--listen-metrics-urls=http://127.0.0.1:2381",
				"--unsafe-no-fsync=true",
				"--log-level=warn",
			},
			health: "http://127.0.0.1:2381/health",
		},
		{
			name: "kube-apiserver", bin: "kube-apiserver",
			args: []string{
				"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(EtcdPort),
				"--bind-address=0.0.0.0",
				"--advertise-address=" + NodeIP,
				"--secure-port=" + strconv.Itoa(APIPort),
				"--cert-dir=" + l.path("apiserver"),
				"--tls-cert-file=" + pki("apiserver.crt"),
				"--tls-private-key-file=" + pki("apiserver.key"),
				"--client-ca-file=" + pki("ca.crt"),
				"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"),
				"--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
				"--kubelet-preferred-address-types=InternalIP",
				"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
				"--service-account-key-file=" + pki("sa.pub"),
				"--service-account-signing-key-file=" + pki("sa.key"),
				"--service-cluster-ip-range=" + ServiceNet,
				"--authorization-mode=Node,RBAC",
				"--enable-admission-plugins=NodeRestriction",
				// Webhook Services (rdmanet-controller's) are called at
				// one of their endpoints, not the ClusterIP: the node
				// runs no kube-proxy.
				"--enable-aggregator-routing=true",
				"--allow-privileged=true",
				"--profiling=false",
				"--v=0",
			},
			health: api + "/readyz",
		},
		{
			name: "kube-controller-manager", bin: "kube-controller-manager",
			args: []string{
				"--kubeconfig=" + kc("kube-controller-manager"),
				"--authentication-kubeconfig=" + kc("kube-controller-manager"),
				"--authorization-kubeconfig=" + kc("kube-controller-manager"),
				"--bind-address=127.0.0.1",
				"--secure-port=10257",
				"--leader-elect=false",
				"--use-service-account-credentials=true",
				"--service-account-private-key-file=" + pki("sa.key"),
				"--root-ca-file=" + pki("ca.crt"),
				"--cluster-signing-cert-file=" + pki("ca.crt"),
				"--cluster-signing-key-file=" + pki("ca.key"),
				"--service-cluster-ip-range=" + ServiceNet,
				"--v=0",
			},
			health: "https://127.0.0.1:10257/healthz",
		},
		{
			name: "kube-scheduler", bin: "kube-scheduler",
			args: []string{
				"--kubeconfig=" + kc("kube-scheduler"),
				"--authentication-kubeconfig=" + kc("kube-scheduler"),
				"--authorization-kubeconfig=" + kc("kube-scheduler"),
				"--bind-address=127.0.0.1",
				"--secure-port=10259",
				"--leader-elect=false",
				"--v=0",
			},
			health: "https://127.0.0.1:10259/healthz",
		},
		{
			name: "containerd", bin: "containerd",
			args:   []string{"--config=" + l.ContainerdConfig()},
			env:    simEnv,
			health: "unix:" + ContainerdSocket,
		},
		{
			name: "kubelet", bin: "kubelet",
			args: []string{
				"--config=" + l.KubeletConfig(),
				"--kubeconfig=" + kc("kubelet"),
				"--hostname-override=" + NodeName,
				"--node-ip=" + NodeIP,
				"--v=1",
			},
			health: "http://127.0.0.1:10248/healthz",
		},
		{
			name: "fake-gpu-plugin", bin: "fake-gpu-plugin",
			args: []string{"--sysfs-root=" + l.Sysfs()},
		},
	}
}

// RecordStateFile is the recording fake's state on the machine (the node
// sees it as /var/lib/rdmanet/netops-record.json, simEnv).
func (l Layout) RecordStateFile() string { return l.path("node/var/lib/rdmanet/netops-record.json") }

// SetRDMANetnsMode sets the simulated kernel's RDMA netns mode, what `rdma
// system set netns <mode>` does at boot on a real node. The agent is told
// the same with --rdma-netns-mode (the overlay; this kernel cannot report
// it).
func SetRDMANetnsMode(l Layout, mode string) error {
	if err := netops.NewRecorder(l.RecordStateFile()).SetNetnsMode(mode); err != nil {
		return fmt.Errorf("simulated RDMA netns mode: %w", err)
	}
	return nil
}
