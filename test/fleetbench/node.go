package fleetbench

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/cni/meta/kube"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/internal/ipam"
)

// Tags of the requests a pod start makes (Counter.WithTag).
const (
	TagDPPod  = "dp-pod"  // a pod whose VF came through the device plugin
	TagDRAPod = "dra-pod" // a pod whose VF came through a ResourceClaim
)

// Client settings of the real binaries: rdmanet-agent's client is
// client-go's default (dra.NewClient sets no QPS: 5, burst 10);
// rdmanet-daemon's is kube.NewKubeSource(kubeconfig, 50): 50, burst 100;
// rdmanet-ipam's kubernetes store has no client-side limit (-1).
const (
	agentQPS, agentBurst   = 5, 10
	daemonQPS, daemonBurst = 50, 100
)

// NodeOptions configure one simulated node.
type NodeOptions struct {
	Name string
	// Base is the node identity's config: host, CA and the node's bound
	// token. Each process of the node (agent, daemon) gets a copy with its
	// own connection.
	Base *rest.Config
	// Transport, when set, carries the node's requests (a connection
	// shared with other nodes, see Options.NodesPerConnection); nil: each
	// process of the node dials its own.
	Transport http.RoundTripper
	// Hardware is the node's sysfs tree.
	Hardware *Hardware
	// Shared, when set, is the discovered snapshot of a tree identical to
	// the node's: the node hands it to its publisher every FullRescan (what
	// the agent's full rescan does) instead of running the agent's scan
	// loop over sysfs. Nil: the real agent (agent.Agent.Run) runs on
	// Hardware with its default health refresh and rescan intervals.
	Shared *agent.Snapshot
	// Topology, with Shared, answers the publisher's topology questions
	// for the shared tree (SharedTopology); nil: the publisher reads
	// Hardware's tree itself.
	Topology   dra.Topology
	FullRescan time.Duration
	StateDir   string // the node's IPAM state (block cache, locks) and plugin dirs
	Logger     *slog.Logger
}

// Node is one simulated node: rdmanet-agent's API side (the DRA
// ResourceSlice publisher with its device-plugin in-use taints, the Node
// annotation) and rdmanet-daemon's (informer caches of the node's pods and
// every NAD, ResourceSlice lookups, network-status and claim status writes,
// the rdmanet-ipam allocator over IPAMBlocks), each process with its own
// client, connection and counter, acting as the node's identity.
type Node struct {
	Name           string
	Agent, Daemon  *Counter
	o              NodeOptions
	pub            *dra.Publisher
	ann            *agent.NodeAnnotator
	live           *kube.KubeSource
	src            *kube.CachedSource
	slices         *kube.SliceResolver
	alloc          *ipam.Allocator
	holders        *holders
	full           *agent.Agent
	fullDone       chan struct{}
	stop           context.CancelFunc
	snapshotMu     sync.Mutex
	snapshotPeriod time.Duration
}

// processConfig is a copy of base for one process: its own connection (a
// dialer of its own keeps client-go from sharing one transport across
// nodes), its counter, user agent and client-side rate limits.
func processConfig(base *rest.Config, shared http.RoundTripper, c *Counter, userAgent string, qps float32, burst int) *rest.Config {
	cfg := rest.CopyConfig(base)
	if shared != nil {
		cfg.Transport, cfg.TLSClientConfig = shared, rest.TLSClientConfig{}
	} else {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		cfg.Dial = d.DialContext
	}
	cfg.WrapTransport = c.Wrap
	cfg.UserAgent = userAgent
	cfg.QPS, cfg.Burst = qps, burst
	return cfg
}

// StartNode starts the node's agent and daemon parts and waits for the
// daemon's caches (bounded by ctx).
func StartNode(ctx context.Context, o NodeOptions) (*Node, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.FullRescan <= 0 {
		o.FullRescan = 10 * time.Second
	}
	n := &Node{Name: o.Name, Agent: NewCounter(), Daemon: NewCounter(), o: o, holders: &holders{}}
	log := o.Logger.With("node", o.Name)
	ctx, n.stop = context.WithCancel(ctx)
	ok := false
	defer func() {
		if !ok {
			n.Stop()
		}
	}()

	// rdmanet-agent --dra: one client (dra.NewClient) for the annotator and the publisher.
	acfg := processConfig(o.Base, o.Transport, n.Agent, "rdmanet-agent/dra", agentQPS, agentBurst)
	aclient, err := kubernetes.NewForConfig(acfg)
	if err != nil {
		return nil, err
	}
	if n.ann, err = agent.NewNodeAnnotator(aclient, o.Name, log); err != nil {
		return nil, err
	}
	var topo dra.Topology
	if o.Shared != nil && o.Topology != nil {
		topo = o.Topology
	}
	if n.pub, err = dra.NewPublisher(dra.PublisherOptions{Client: aclient, NodeName: o.Name, SysfsRoot: o.Hardware.Root, Topology: topo, Logger: log, InUse: n.holders}); err != nil {
		return nil, err
	}
	go n.ann.Run(ctx)
	n.pub.Start(ctx)
	snapshots := func(snap *agent.Snapshot) { // apiServices.wire's hook
		n.ann.Observe(snap.Node.RDMANetnsMode)
		_ = n.pub.Update(snap.Node, snap.Pools)
	}
	if o.Shared == nil {
		n.full, err = agent.New(agent.Options{SysfsRoot: o.Hardware.Root, ConfigPaths: []string{o.Hardware.ConfigPath},
			PluginDir: filepath.Join(o.StateDir, "device-plugins"), DevInfoDir: filepath.Join(o.StateDir, "devinfo"),
			NetnsModeFlag: "exclusive", Logger: log, Snapshots: snapshots})
		if err != nil {
			return nil, err
		}
		n.fullDone = make(chan struct{})
		go func() { defer close(n.fullDone); _ = n.full.Run(ctx) }()
	} else {
		go func() {
			// The agent's first discovery, then one per full rescan; the
			// phase is random as nodes' agents start at different times.
			snapshots(o.Shared)
			t := time.NewTimer(time.Duration(rand.Int64N(int64(o.FullRescan))))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				snapshots(o.Shared)
				t.Reset(o.FullRescan)
			}
		}()
	}

	// rdmanet-daemon: kube.NewKubeSource(kubeconfig, 50), its cached source
	// and slice resolver; the in-process rdmanet-ipam's kubernetes store.
	dcfg := processConfig(o.Base, o.Transport, n.Daemon, "rdmanet-cni", daemonQPS, daemonBurst)
	// (The real daemon's clients share one connection through client-go's
	// transport cache; here each client has its own, which changes no
	// request count.)
	core, err := kubernetes.NewForConfig(dcfg)
	if err != nil {
		return nil, err
	}
	nads, err := nadclient.NewForConfig(dcfg)
	if err != nil {
		return nil, err
	}
	n.live = &kube.KubeSource{Core: core, NADs: nads}
	n.slices = kube.NewSliceResolver(core, n.Name)
	icfg := processConfig(o.Base, o.Transport, n.Daemon, "rdmanet-ipam", -1, -1)
	icfg.Timeout = 30 * time.Second
	store, err := ipam.NewKubeStore(icfg)
	if err != nil {
		return nil, err
	}
	ipamDir := filepath.Join(o.StateDir, "ipam")
	n.alloc = &ipam.Allocator{Store: store, Node: o.Name, Lock: &ipam.FileLock{Dir: ipamDir}, StateDir: ipamDir}
	if n.src, err = kube.NewCachedSource(ctx, n.live, o.Name); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

// Stop stops the node's loops; what it published stays.
func (n *Node) Stop() {
	n.stop()
	if n.fullDone != nil {
		<-n.fullDone
	}
	if n.pub != nil {
		func() {
			defer func() { _ = recover() }() // Stop before the first Update has no controller
			n.pub.Stop()
		}()
	}
}

// Published is what the node's publisher handed to its ResourceSlice controller last.
func (n *Node) Published() int { return len(n.pub.Published()) }

// DeviceName is the published device of a VF's PCI address, "" when none.
func (n *Node) DeviceName(bdf string) string {
	for _, d := range n.pub.Published() {
		if a, ok := d.Attributes[dra.AttrMultusDeviceID]; ok && a.StringValue != nil && *a.StringValue == bdf {
			return d.Name
		}
	}
	return ""
}

// PodStart is one pod whose sandbox the node sets up.
type PodStart struct {
	Namespace, Name, NAD string
	// DeviceID is the VF's PCI address: kubelet's device-plugin
	// allocation, or the device of the pod's claim.
	DeviceID string
	// Claim, when set, is the pod's ResourceClaim (a DRA pod).
	Claim *meta.ClaimDevice
}

// StartPod does what the node's rdmanet code does for a pod's sandbox,
// through the real code paths: the pod and its NAD from the daemon's
// caches, for a DRA pod the device's attributes from its ResourceSlice,
// an address from rdmanet-ipam's allocator (an IPAMBlock update), the
// network-status annotation, and for a DRA pod the claim's device status;
// for a device-plugin pod, kubelet's PodResources now lists the VF, which
// the agent's publisher picks up on its next poll.
func (n *Node) StartPod(ctx context.Context, p PodStart) error {
	tag := TagDPPod
	if p.Claim != nil {
		tag = TagDRAPod
	}
	ctx = WithTag(ctx, tag)
	pod, err := n.src.Pod(ctx, p.Namespace, p.Name)
	if err != nil {
		return err
	}
	nad, err := n.src.NAD(ctx, p.Namespace, p.NAD)
	if err != nil {
		return err
	}
	deviceID := p.DeviceID
	if p.Claim != nil {
		res, id, ok, err := n.slices.Resolve(ctx, p.Claim.Driver, p.Claim.Pool, p.Claim.Device)
		if err != nil {
			return err
		}
		if !ok || res != Resource {
			return fmt.Errorf("pod %s/%s: claim device %s: resource %q, want %s", p.Namespace, p.Name, p.Claim.Device, res, Resource)
		}
		deviceID = id
	}
	cfg, err := ipam.Parse([]byte(nad.Spec.Config), ipam.Env{StoreType: ipam.StoreKubernetes})
	if err != nil {
		return err
	}
	owner := ipam.Owner{ContainerID: "sandbox-" + string(pod.UID), IfName: "net1", PodNamespace: pod.Namespace, PodName: pod.Name, PodUID: string(pod.UID)}
	addr, err := n.alloc.Allocate(ctx, cfg.Network, cfg.Ranges[0], owner)
	if err != nil {
		return err
	}
	ip := fmt.Sprintf("%s/%d", addr, cfg.Ranges[0].Prefix.Bits())
	mac := fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", addr.As4()[0], addr.As4()[1], addr.As4()[2], addr.As4()[3])
	status := []devinfo.NetworkStatus{
		{NetworkStatus: nadv1.NetworkStatus{Name: "cluster", Interface: "eth0", IPs: []string{"10.244.0.10"}, Mac: "0a:58:0a:f4:00:0a", Default: true}},
		{NetworkStatus: nadv1.NetworkStatus{Name: p.Namespace + "/" + p.NAD, Interface: "net1", IPs: []string{addr.String()}, Mac: mac,
			DeviceInfo: &nadv1.DeviceInfo{Type: "pci", Version: "1.1.0", Pci: &nadv1.PciDevice{PciAddress: deviceID}}}},
	}
	if err := n.src.SetNetworkStatus(ctx, pod.Namespace, pod.Name, pod.UID, status); err != nil {
		return err
	}
	if p.Claim != nil {
		return n.src.SetClaimNetworks(ctx, []meta.ClaimNetwork{{ClaimDevice: *p.Claim, Pod: pod.Name, Interface: "net1", IPs: []string{ip}, MAC: mac}})
	}
	n.holders.add(dra.DPHolder{Resource: Resource, DeviceID: deviceID, Pod: pod.Namespace + "/" + pod.Name})
	return nil
}

// FullAgent reports whether the node runs the real agent loop over its own tree.
func (n *Node) FullAgent() bool { return n.full != nil }

// holders stands in for kubelet's PodResources answer: the VFs the node's
// pods hold through the device plugin.
type holders struct {
	mu   sync.Mutex
	list []dra.DPHolder
}

func (h *holders) add(d dra.DPHolder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.list = append(h.list, d)
}

func (h *holders) DevicePluginHolders(context.Context) ([]dra.DPHolder, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.list), nil
}

// SharedTransport is one connection's transport to the API server of cfg
// (its TLS settings; no credentials: each node's config adds its own).
func SharedTransport(cfg *rest.Config) (http.RoundTripper, error) {
	tlsCfg, err := rest.TLSConfigFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: cfg.CAFile, CAData: cfg.CAData}})
	if err != nil {
		return nil, err
	}
	return utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 25,
		DialContext: (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext, TLSHandshakeTimeout: 10 * time.Second}), nil
}
