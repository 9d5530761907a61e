package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/guidpool"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// The simulated hardware: the same two RoCE PFs on every simulated node.
const (
	ExclusivePF    = "enp65s0f0np0" // ConnectX-6 Dx, NUMA 0, SR-IOV VFs (exclusive pool)
	ExclusivePFBDF = "0000:41:00.0"
	SharedPF       = "ens8f0np0" // ConnectX-6 Dx, NUMA 1, no VFs (shared pool)
	SharedPFBDF    = "0000:81:00.0"
	SharedPFAddr   = "192.168.2.10/24"
	ExclusivePFAdr = "10.0.1.100/24"

	ExclusiveResource = "example.com/sriov_rdma"
	SharedResource    = "rdma/rdma_shared_device_eth"

	clusterNetwork = "k8s-pod-network"
)

// VFNetdev names VF i's netdev on the simulated node.
func VFNetdev(i int) string { return fmt.Sprintf("enp65s0f0v%d", i) }

// vfMAC is the MAC VF i's netdev is created with (its identity in the soak's checks).
func vfMAC(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x00, 0x00, 0x41, byte(i >> 8), byte(i + 2)}
}

// nodeDef is what identifies a simulated node; everything else is derived
// from it, so --cleanup can rebuild the CNI side from the state file alone.
type nodeDef struct {
	Name    string `json:"name"`
	Mode    string `json:"mode"` // RDMA netns mode: exclusive or shared
	PodCIDR string `json:"podCIDR"`
	VFs     int    `json:"vfs"`
	// IB: the InfiniBand node (sysfsfixture.NewIBNode) instead of the RoCE one.
	IB bool `json:"ib,omitempty"`
}

// resources are the device plugin resources the node's pods use.
func (d nodeDef) resources() []string {
	switch {
	case d.IB && d.Mode == netops.RDMANetnsExclusive:
		return []string{IBExclusiveResource}
	case d.IB:
		return []string{IBSharedResource}
	case d.Mode == netops.RDMANetnsExclusive:
		return []string{ExclusiveResource}
	}
	return []string{SharedResource}
}

// hardware describes the node's simulated NICs.
func (d nodeDef) hardware() string {
	if d.IB {
		return fmt.Sprintf("ConnectX-7 in InfiniBand mode (%s with %d VFs, GUIDs from the node's GUID pool; %s shared through IPoIB), an IB-only function, %s",
			IBExclusivePort, d.VFs, IBSharedPort, ibMgmt)
	}
	return fmt.Sprintf("2 RoCE PFs (%s NUMA 0 with %d VFs, %s NUMA 1)", ExclusivePF, d.VFs, SharedPF)
}

// layout holds a run's paths and names.
type layout struct {
	WorkDir string `json:"workDir"`
	BinDir  string `json:"binDir"` // where the plugin binaries were found
	Prefix  string `json:"prefix"` // network namespace name prefix
}

func (l layout) cniBin() string          { return filepath.Join(l.WorkDir, "bin") }
func (l layout) manifests() string       { return filepath.Join(l.WorkDir, "cluster", "manifests") }
func (l layout) statusDir() string       { return filepath.Join(l.WorkDir, "cluster", "network-status") }
func (l layout) nodeDir(n string) string { return filepath.Join(l.WorkDir, "nodes", n) }
func (l layout) hostNS(n string) string  { return l.Prefix + "-" + n }
func (l layout) wireNS(n string) string  { return l.Prefix + "-" + n + "-wire" }
func (l layout) podNS(pod string) string { return l.Prefix + "-" + pod }

// stateDirs are the node directories whose files CNI plugins own; the host
// comparison covers them.
var stateDirs = []string{"cni-state", "rdmanet", "ipam", "host-local", "runtime-cache", "guid-pool"}

// node is a running simulated node.
type node struct {
	def       nodeDef
	l         layout
	dir       string
	host      ns.NetNS
	wire      ns.NetNS
	fix       *sysfsfixture.Node
	ib        *sysfsfixture.IBNode // the IB node's fixture (nil on RoCE nodes)
	rec       *netops.Recorder
	logMark   int // recorder log lines before the current round's ADDs (markLog)
	kubelet   *kubelet
	agent     *agent.Agent
	stopAgent context.CancelFunc
	agentDone chan error
	cni       *libcni.CNIConfig
	meta      *libcni.NetworkConfigList
	log       *slog.Logger
}

// env is what the CNI plugin processes of this node see: the fixture
// sysfs, the recording netops, the node's state dirs and IPAM store.
func (d nodeDef) env(l layout) []string {
	dir := l.nodeDir(d.Name)
	return []string{
		"RDMANET_SYSFS_ROOT=" + filepath.Join(dir, "sys"),
		"RDMANET_CNI_STATE_DIR=" + filepath.Join(dir, "cni-state"),
		netops.EnvImpl + "=record",
		netops.EnvState + "=" + filepath.Join(dir, "netops.json"),
		"RDMANET_IPAM_STORE_PATH=" + filepath.Join(dir, "ipam"),
		"RDMANET_IPAM_STORE_TYPE=local",                                  // a simulated node: node-local addresses by explicit choice
		"RDMANET_IPAM_CONFIG=" + filepath.Join(dir, "rdmanet-ipam.conf"), // absent: no node config
		"NODENAME=" + d.Name,
		// the node's GUID pool (IB nodes; absent elsewhere: no pool), never the machine's
		guidpool.EnvConfig + "=" + d.guidPoolConfigPath(l),
		netops.EnvFault + "=",
		// the node's own daemon (the soak runs one), never a daemon the machine may run
		"RDMANET_PLUGIN_SOCKET=" + filepath.Join(dir, "daemon", "plugins.sock"),
	}
}

// nodeExec runs plugins with the node's environment added (the process
// environment stays untouched, so nodes can run side by side).
type nodeExec struct {
	raw *invoke.RawExec
	env []string
}

func (e *nodeExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	env := append(environ, e.env...)
	if extra, ok := ctx.Value(callEnvKey{}).([]string); ok {
		env = append(env, extra...) // later entries win (os/exec keeps the last of a key)
	}
	return e.raw.ExecPlugin(ctx, path, stdin, env)
}

type callEnvKey struct{}

// withCallEnv adds environment entries for the plugin processes of one CNI
// call made with ctx (the soak's per-call failpoints).
func withCallEnv(ctx context.Context, env ...string) context.Context {
	return context.WithValue(ctx, callEnvKey{}, env)
}

func (e *nodeExec) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}

func (e *nodeExec) Decode(b []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(b)
}

// cniRunner is the node's "container runtime" side of CNI: libcni over the
// node's binaries, its environment and the rdmanet meta config.
func (d nodeDef) cniRunner(l layout) (*libcni.CNIConfig, *libcni.NetworkConfigList, error) {
	exec := &nodeExec{raw: &invoke.RawExec{Stderr: os.Stderr}, env: d.env(l)}
	c := libcni.NewCNIConfigWithCacheDir([]string{l.cniBin()}, filepath.Join(l.nodeDir(d.Name), "runtime-cache"), exec)
	list, err := d.metaConfList(l, "")
	return c, list, err
}

// metaConf is the node's rdmanet network config; daemonSocket "" makes the
// shim run rdmanet-direct on every call.
func (d nodeDef) metaConf(l layout, daemonSocket string) map[string]any {
	dir := l.nodeDir(d.Name)
	conf := map[string]any{
		"cniVersion": "1.0.0", "name": "rdmanet", "type": "rdmanet",
		"clusterNetwork": clusterNetwork, "confDir": filepath.Join(dir, "net.d"),
		"cniDir": filepath.Join(dir, "rdmanet"), "binDir": l.cniBin(),
		"source":             map[string]any{"type": "static", "dir": l.manifests(), "statusDir": l.statusDir()},
		"podResourcesSocket": filepath.Join(dir, "pod-resources", "kubelet.sock"),
		"deviceInfoDir":      filepath.Join(dir, "devinfo"),
		"logFile":            filepath.Join(dir, "rdmanet.log"), "logLevel": "info",
	}
	if daemonSocket != "" {
		conf["daemonSocket"] = daemonSocket
	}
	return conf
}

func (d nodeDef) metaConfList(l layout, daemonSocket string) (*libcni.NetworkConfigList, error) {
	b, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "rdmanet", "plugins": []any{d.metaConf(l, daemonSocket)}})
	if err != nil {
		return nil, err
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("node %s: meta CNI config: %w", d.Name, err)
	}
	return list, nil
}

func (d nodeDef) defaultNetwork(l layout) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"bridge","bridge":"cni0","isDefaultGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"dataDir":%q}}]}`, clusterNetwork, d.PodCIDR, filepath.Join(l.nodeDir(d.Name), "host-local"))
}

// buildFixture writes the node's sysfs: two RoCE PFs on two NUMA nodes,
// the first with d.VFs VFs whose netdevs are the host namespace's veth ends.
func (d nodeDef) buildFixture(root string) (*sysfsfixture.Node, error) {
	n, err := sysfsfixture.New(root)
	if err != nil {
		return nil, err
	}
	excl := sysfsfixture.Function{BDF: ExclusivePFBDF, Vendor: sysfsfixture.VendorMellanox, Device: sysfsfixture.DeviceCX6Dx,
		Driver: "mlx5_core", NUMA: 0, PCIRoot: "pci0000:40", Netdev: ExclusivePF, RDMADev: n.NextRDMAName(), IPv4: "10.0.1.100",
		TotalVFs: max(d.VFs, 8), VFDevice: sysfsfixture.DeviceCX6DxVF, VFNetdev: VFNetdev, MTU: 9000}
	shared := sysfsfixture.Function{BDF: SharedPFBDF, Vendor: sysfsfixture.VendorMellanox, Device: sysfsfixture.DeviceCX6Dx,
		Driver: "mlx5_core", NUMA: 1, PCIRoot: "pci0000:80", Netdev: SharedPF, RDMADev: n.NextRDMAName(), IPv4: "192.168.2.10", MTU: 9000}
	for _, f := range []sysfsfixture.Function{excl, shared} {
		if err := n.AddFunction(f); err != nil {
			return nil, err
		}
	}
	if err := n.SetNumVFs(excl, 0, d.VFs); err != nil {
		return nil, err
	}
	return n, nil
}

// hostProbe answers the agent's questions about the kernel from the
// simulated host namespace and the recording RDMA subsystem.
type hostProbe struct {
	host ns.NetNS
	rec  *netops.Recorder
}

func (p hostProbe) DefaultRouteLinks() ([]string, error) {
	var out []string
	err := p.host.Do(func(ns.NetNS) error {
		ls, err := netops.Links()
		if err != nil {
			return err
		}
		for _, l := range ls {
			rs, err := netops.Routes(l.Name)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if r == "default" {
					out = append(out, l.Name)
					break
				}
			}
		}
		// and every netdev under them (bond slaves, VLAN parents, bridge
		// ports), as the agent on a node resolves them
		below, err := netops.LowerLinks(out...)
		out = append(out, below...)
		return err
	})
	return out, err
}

func (p hostProbe) RDMANetnsMode() (string, error) { return p.rec.NetnsMode() }

// startNode builds and starts one simulated node. On error everything it
// created is removed.
func startNode(ctx context.Context, d nodeDef, l layout, m *Manifests, log *slog.Logger) (_ *node, err error) {
	n := &node{def: d, l: l, dir: l.nodeDir(d.Name), log: log}
	defer func() {
		if err != nil {
			n.stop()
			_ = teardownNode(d, l)
		}
	}()
	for _, sub := range append([]string{"pools", "net.d", "devinfo", "dp", "pod-resources"}, stateDirs...) {
		if err := os.MkdirAll(filepath.Join(n.dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("node %s: %w", d.Name, err)
		}
	}
	if d.IB {
		if n.ib, err = d.buildIBFixture(filepath.Join(n.dir, "sys")); err != nil {
			return nil, fmt.Errorf("node %s: sysfs fixture: %w", d.Name, err)
		}
		n.fix = n.ib.Node
	} else if n.fix, err = d.buildFixture(filepath.Join(n.dir, "sys")); err != nil {
		return nil, fmt.Errorf("node %s: sysfs fixture: %w", d.Name, err)
	}
	if n.host, err = newNamedNS(l.hostNS(d.Name)); err != nil {
		return nil, fmt.Errorf("node %s: host namespace: %w", d.Name, err)
	}
	if n.wire, err = newNamedNS(l.wireNS(d.Name)); err != nil {
		return nil, fmt.Errorf("node %s: wire namespace: %w", d.Name, err)
	}
	if err := n.plumb(); err != nil {
		return nil, fmt.Errorf("node %s: %w", d.Name, err)
	}
	n.rec = netops.NewRecorder(filepath.Join(n.dir, "netops.json"))
	if err := n.rec.SetNetnsMode(d.Mode); err != nil {
		return nil, fmt.Errorf("node %s: %w", d.Name, err)
	}
	sriovCfg, sharedCfg := filepath.Join(n.dir, "pools", "sriovdp-config.yaml"), filepath.Join(n.dir, "pools", "nicclusterpolicy.yaml")
	files := map[string][]byte{sriovCfg: m.SriovConfig, sharedCfg: m.SharedConfig,
		filepath.Join(n.dir, "net.d", "00-"+clusterNetwork+".conflist"): []byte(d.defaultNetwork(l))}
	if d.IB {
		files[sriovCfg], files[sharedCfg] = m.IBSriovConfig, m.IBSharedConfig
		if files[d.guidPoolConfigPath(l)], err = d.guidPoolConfig(l); err != nil {
			return nil, err
		}
		if err := n.setIPoIBParents(); err != nil {
			return nil, fmt.Errorf("node %s: %w", d.Name, err)
		}
	}
	for p, b := range files {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, fmt.Errorf("node %s: %w", d.Name, err)
		}
	}
	if n.kubelet, err = startKubelet(d.Name, filepath.Join(n.dir, "dp"), filepath.Join(n.dir, "pod-resources", "kubelet.sock"), log); err != nil {
		return nil, err
	}
	if err := n.startAgent(); err != nil {
		return nil, err
	}
	if n.cni, n.meta, err = d.cniRunner(l); err != nil {
		return nil, err
	}
	return n, nil
}

// startAgent runs the node agent (in this process) on the node's fixture
// and pool configs; its log is appended to the node's agent.log.
func (n *node) startAgent() error {
	agentLog, err := os.OpenFile(filepath.Join(n.dir, "agent.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.def.Name, err)
	}
	pools := filepath.Join(n.dir, "pools")
	n.agent, err = agent.New(agent.Options{SysfsRoot: n.fix.Root, ConfigPaths: []string{filepath.Join(pools, "sriovdp-config.yaml"), filepath.Join(pools, "nicclusterpolicy.yaml")},
		PluginDir: filepath.Join(n.dir, "dp"), DevInfoDir: filepath.Join(n.dir, "devinfo"), NetnsModeFlag: n.def.Mode,
		Probe: hostProbe{host: n.host, rec: n.rec}, Resync: time.Second, Logger: slog.New(slog.NewTextHandler(agentLog, nil))})
	if err != nil {
		agentLog.Close()
		return fmt.Errorf("node %s: agent: %w", n.def.Name, err)
	}
	actx, cancel := context.WithCancel(context.Background())
	n.stopAgent, n.agentDone = cancel, make(chan error, 1)
	go func() {
		n.agentDone <- n.agent.Run(actx)
		agentLog.Close()
	}()
	return nil
}

// simNetdev is one netdev of a simulated node (a veth end in its host netns).
type simNetdev struct {
	name string
	mac  net.HardwareAddr
	mtu  int
	addr string
	up   bool
}

// netdevs are the node's PF and VF netdevs.
func (d nodeDef) netdevs() []simNetdev {
	if d.IB {
		return d.ibNetdevs()
	}
	devs := []simNetdev{
		{name: ExclusivePF, mac: net.HardwareAddr{0x02, 0x00, 0x00, 0x41, 0x00, 0x00}, mtu: 9000, addr: ExclusivePFAdr, up: true},
		{name: SharedPF, mac: net.HardwareAddr{0x02, 0x00, 0x00, 0x81, 0x00, 0x00}, mtu: 9000, addr: SharedPFAddr, up: true},
	}
	for i := 0; i < d.VFs; i++ {
		devs = append(devs, simNetdev{name: VFNetdev(i), mac: vfMAC(i), mtu: 1500})
	}
	return devs
}

// plumb creates the node's netdevs: each PF and VF netdev is a veth end in
// the host namespace (its peer in the wire namespace), named as the sysfs
// fixture names it.
func (n *node) plumb() error {
	devs := n.def.netdevs()
	if err := n.host.Do(func(ns.NetNS) error { return netops.SetLinkUp("lo") }); err != nil {
		return err
	}
	for i, d := range devs {
		peer := fmt.Sprintf("wire%d", i)
		err := n.host.Do(func(ns.NetNS) error {
			if err := netops.AddVeth(d.name, peer, d.mac, n.wire); err != nil {
				return err
			}
			if err := netops.SetLinkMTU(d.name, d.mtu); err != nil {
				return err
			}
			if d.addr != "" {
				ip, ipn, err := net.ParseCIDR(d.addr)
				if err != nil {
					return err
				}
				ipn.IP = ip
				if err := netops.AddAddr(d.name, ipn); err != nil {
					return err
				}
			}
			if d.up {
				return netops.SetLinkUp(d.name)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("simulated netdev %s: %w", d.name, err)
		}
		err = n.wire.Do(func(ns.NetNS) error {
			if err := netops.SetLinkMTU(peer, d.mtu); err != nil {
				return err
			}
			return netops.SetLinkUp(peer)
		})
		if err != nil {
			return fmt.Errorf("simulated wire of %s: %w", d.name, err)
		}
	}
	return nil
}

// waitPools blocks until the node's kubelet stand-in sees the pool(s) of
// its mode with enough devices.
func (n *node) waitPools(ctx context.Context, want map[string]int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return n.kubelet.waitResources(ctx, want)
}

// bringUp runs the default network once for a throw-away sandbox, as a
// node that already runs pods has done: the bridge plugin creates cni0 with
// the pod CIDR's gateway and keeps it. The host snapshot is taken after.
func (n *node) bringUp(ctx context.Context) error {
	name := n.l.podNS(n.def.Name + "-bringup")
	sandbox, err := newNamedNS(name)
	if err != nil {
		return err
	}
	defer func() {
		sandbox.Close()
		_ = deleteNamedNS(name)
	}()
	list, err := libcni.ConfListFromBytes([]byte(n.def.defaultNetwork(n.l)))
	if err != nil {
		return err
	}
	rt := &libcni.RuntimeConf{ContainerID: "bringup-" + n.def.Name, NetNS: sandbox.Path(), IfName: "eth0", Args: [][2]string{}}
	return n.host.Do(func(ns.NetNS) error {
		if _, err := n.cni.AddNetworkList(ctx, list, rt); err != nil {
			return fmt.Errorf("node %s: default network bring-up: %w", n.def.Name, err)
		}
		if err := n.cni.DelNetworkList(ctx, list, rt); err != nil {
			return fmt.Errorf("node %s: default network bring-up DEL: %w", n.def.Name, err)
		}
		return nil
	})
}

// stop ends the node's agent and kubelet stand-in (the namespaces stay).
func (n *node) stop() {
	if n.stopAgent != nil {
		n.stopAgent()
		<-n.agentDone
		n.stopAgent = nil
	}
	if n.kubelet != nil {
		n.kubelet.stop()
		n.kubelet = nil
	}
	if n.host != nil {
		n.host.Close()
	}
	if n.wire != nil {
		n.wire.Close()
	}
}

// teardownNode deletes the node's namespaces (its veths go with them).
func teardownNode(d nodeDef, l layout) error {
	var errs []string
	for _, name := range []string{l.hostNS(d.Name), l.wireNS(d.Name)} {
		if err := deleteNamedNS(name); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
