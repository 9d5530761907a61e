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
	// optional: a missing binary is logged and the node runs without it
	// (the fake GPU plugin; kube-proxy and CoreDNS on a checkout whose
	// tools predate them).
	optional bool
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

// components returns node n's processes in start order: on the first node
// the control plane (etcd, kube-apiserver, controller-manager, scheduler)
// first; then on every node containerd, kubelet, kube-proxy and the fake GPU
// plugin; CoreDNS last on the first node (it needs the API server and
// serves on the node's address, behind the kube-dns Service).
func components(l Layout, n Node) []component {
	pki := func(f string) string { return filepath.Join(l.PKI(), f) }
	api := fmt.Sprintf("https://%s:%d", NodeIP, APIPort)
	kc := func(id string) string { return pki(id + ".kubeconfig") }
	var cs []component
	if n.ControlPlane() {
		cs = append(cs, controlPlane(l, pki, kc, api)...)
	}
	cs = append(cs,
		component{
			name: "containerd", bin: "containerd",
			args:   []string{"--config=" + l.NodeConfig(n, "containerd.toml")},
			env:    simEnv,
			health: "unix:" + ContainerdSocket,
		},
		component{
			name: "kubelet", bin: "kubelet",
			args: []string{
				"--config=" + l.NodeConfig(n, "kubelet.yaml"),
				"--kubeconfig=" + kc(kubeletIdentity(n)),
				"--hostname-override=" + n.Name,
				"--node-ip=" + n.IP,
				"--node-labels=" + NodeModeLabel + "=" + n.Mode,
				"--v=1",
			},
			health: "http://127.0.0.1:10248/healthz",
		},
		component{
			name: "kube-proxy", bin: "kube-proxy", optional: true,
			args:   []string{"--config=" + l.NodeConfig(n, "kube-proxy.yaml"), "--hostname-override=" + n.Name, "--v=0"},
			health: "http://127.0.0.1:10256/healthz",
		},
		component{
			name: "fake-gpu-plugin", bin: "fake-gpu-plugin", optional: true,
			args: []string{"--sysfs-root=" + l.NodeSysfs(n)},
		},
	)
	if n.ControlPlane() {
		cs = append(cs, component{
			name: "coredns", bin: "coredns", optional: true,
			args:   []string{"-conf=" + l.Config("Corefile")},
			health: "http://127.0.0.1:8181/ready",
		})
	}
	return cs
}

// NodeModeLabel is the label each simulated node carries with its fixed
// RDMA netns mode (what a fleet's node provisioning would set): scenarios
// pick exclusive or shared nodes by it.
const NodeModeLabel = "rdmanet.io/sim-rdma-netns-mode"

// kubeletIdentity is the base name of node n's kubelet certificate and
// kubeconfig under pki/ (system:node:<name>).
func kubeletIdentity(n Node) string {
	if n.Index == 0 {
		return "kubelet"
	}
	return "kubelet-" + n.Name
}

// controlPlane is the first node's etcd, API server, controller-manager
// and scheduler.
func controlPlane(l Layout, pki, kc func(string) string, api string) []component {
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
				// one of their endpoints, not the ClusterIP: the API
				// server runs in the first node's network namespace but
				// not behind its kube-proxy's rules for its own traffic
				// in every setup; endpoints always work.
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
				// a crashed node's pods are evicted soon (node loss)
				"--node-monitor-grace-period=20s",
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
	}
}

// RecordStateFile is the recording fake's state of the first node (the
// node sees it as /var/lib/rdmanet/netops-record.json, simEnv).
func (l Layout) RecordStateFile() string { return l.path("node/var/lib/rdmanet/netops-record.json") }

// SetRDMANetnsMode sets the first node's simulated kernel's RDMA netns
// mode, what `rdma system set netns <mode>` does at boot on a real node.
func SetRDMANetnsMode(l Layout, mode string) error {
	return setNodeNetnsMode(l.RecordStateFile(), mode)
}

// setNodeNetnsMode sets a node's simulated kernel's RDMA netns mode; the
// agent reads it from there as it reads the kernel's on a real node.
func setNodeNetnsMode(stateFile, mode string) error {
	if err := netops.NewRecorder(stateFile).SetNetnsMode(mode); err != nil {
		return fmt.Errorf("simulated RDMA netns mode: %w", err)
	}
	return nil
}
