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

// kubeletConfig is the node's KubeletConfiguration.
func kubeletConfig(l Layout) string {
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
resolvConf: %s
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
`, CgroupRoot, ContainerdSocket, NodeIP, filepath.Join(l.PKI(), "ca.crt"), l.Config("resolv.conf"), PodCIDR)
}

// clusterNetworkConflist is the node's primary network: the upstream bridge
// and host-local plugins (standing in for Calico/Cilium) and portmap for
// hostPort.
func clusterNetworkConflist() string {
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
`, ClusterNetwork, PodCIDR)
}

// writeConfigs writes every config file of the node.
func writeConfigs(l Layout) error {
	files := map[string]string{
		l.ContainerdConfig():    containerdConfig(l),
		l.KubeletConfig():       kubeletConfig(l),
		l.Config("resolv.conf"): "nameserver " + FabricIP + "\n",
		filepath.Join(l.Dir, "node/etc/cni/net.d/10-k8s-pod-network.conflist"): clusterNetworkConflist(),
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
