package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// Fixed local image references (nothing can be pulled here; the images are
// built by `make image-pause image-testbox image-sim` and imported).
const (
	PauseImage   = "localhost/pause:rdmanet"
	TestboxImage = "localhost/testbox:latest"
)

// containerdConfig is containerd 2.x's config (version 3): default root and
// state (private mounts of the node), the CRI with the node's CNI dirs, runc
// from the tools dir, and the two settings this machine needs
// (docs/cluster.md): restrict_oom_score_adj, and the pinned local sandbox image.
func containerdConfig(l Layout) string {
	return fmt.Sprintf(`version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = %q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/opt/cni/bin"]
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
    use_internal_loopback = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %q
        SystemdCgroup = false

[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %q
`, ContainerdSocket, l.binary("runc"), PauseImage)
}

// kubeletConfig is node n's KubeletConfiguration. Pods resolve through
// CoreDNS behind the kube-dns Service (clusterDNS) when CoreDNS is built.
func kubeletConfig(l Layout, n Node, dns bool) string {
	clusterDNS := ""
	if dns {
		clusterDNS = "clusterDNS: [" + DNSServiceIP + "]\n"
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 (hybrid) on this machine: kubelet >= 1.35 refuses it unless told.
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
clusterDomain: cluster.local
%sresolvConf: %s
podCIDR: %s
podLogsDir: /var/log/pods
topologyManagerPolicy: best-effort
topologyManagerScope: pod
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
maxPods: 110
`, n.CgroupRoot(), ContainerdSocket, n.IP, filepath.Join(l.PKI(), "ca.crt"), clusterDNS, l.Config("resolv.conf"), n.PodCIDR)
}

// clusterNetworkConflist is the node's primary network: the upstream bridge
// and host-local plugins (standing in for Calico/Cilium) and portmap for
// hostPort.
func clusterNetworkConflist(podCIDR string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, ClusterNetwork, podCIDR)
}

// kubeProxyConfig is node n's KubeProxyConfiguration: iptables mode, and
// nothing that writes a machine-wide sysctl (conntrack limits stay the
// kernel's: the node is a network namespace of a shared machine).
// masqueradeAll: a pod reaching a Service backed by a pod on the same
// bridge gets its reply through the node, as the bridge has no
// br_netfilter here.
func kubeProxyConfig(l Layout, n Node) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables:
  masqueradeAll: true
  localhostNodePorts: false
  syncPeriod: 10s
  minSyncPeriod: 1s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, filepath.Join(l.PKI(), "kube-proxy.kubeconfig"), ClusterCIDR, n.IP)
}

// corefile serves cluster.local from the API server (CoreDNS's kubernetes
// plugin) on the first node's address, port 53, behind the kube-dns
// Service. Nothing is forwarded: the machine has no upstream resolver.
func corefile(l Layout) string {
	return fmt.Sprintf(`.:53 {
    bind %s
    errors
    health 127.0.0.1:8180
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
    loadbalance
}
`, NodeIP, filepath.Join(l.PKI(), "coredns.kubeconfig"))
}

// writeConfigs writes every config file of the cluster and its nodes.
func writeConfigs(l Layout, nodes []Node, dns bool) error {
	files := map[string]string{
		l.Config("resolv.conf"): "nameserver " + FabricIP + "\n",
		l.Config("Corefile"):    corefile(l),
	}
	for _, n := range nodes {
		files[l.NodeConfig(n, "containerd.toml")] = containerdConfig(l)
		files[l.NodeConfig(n, "kubelet.yaml")] = kubeletConfig(l, n, dns)
		files[l.NodeConfig(n, "kube-proxy.yaml")] = kubeProxyConfig(l, n)
		files[l.NodeDir(n, "etc/cni/net.d/10-k8s-pod-network.conflist")] = clusterNetworkConflist(n.PodCIDR)
	}
	for p, s := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}
