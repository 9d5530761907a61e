package main

import (
	"context"
	"flag"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/agent/agentmetrics"
	"github.com/rdmanet/rdmanet/internal/dra"
)

// apiFlags are the flags of what the agent does with API access.
type apiFlags struct {
	dra          bool
	kubeconfig   string
	registrarDir string
	pluginDir    string
	stateDir     string
	cdiDir       string
	ncclEnv      bool
}

func (f *apiFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.dra, "dra", false, "Dynamic Resource Allocation for driver "+dra.DriverName+" (docs/dra.md): publish the node's RDMA devices as ResourceSlices (one device per VF of an exclusive pool, one shareable device per HCA of a shared pool) and serve the DRA kubelet plugin that prepares claims (CDI specs with the /dev/infiniband nodes and PCIDEVICE_ env, device-info, checkpoint); a device never serves a claim and a device-plugin allocation at once. Off by default: the device plugin pools are served either way. Needs API access (--kubeconfig or the pod's service account), --node-name and kubelet's PodResources socket")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file for the API server; with --dra, empty means the pod's in-cluster service account. With API access the agent also annotates its Node with rdmanet.io/rdma-netns-mode (exclusive|shared) when the mode changes")
	fs.StringVar(&f.registrarDir, "dra-registrar-dir", dra.DefaultRegistrarDir, "with --dra: kubelet's plugin registration directory")
	fs.StringVar(&f.pluginDir, "dra-plugin-dir", dra.DefaultPluginDir, "with --dra: the DRA kubelet plugin's directory (its gRPC socket)")
	fs.StringVar(&f.stateDir, "dra-state-dir", "", "with --dra: directory of the kubelet plugin's checkpoint of prepared claims (default --dra-plugin-dir); must survive agent restarts")
	fs.BoolVar(&f.ncclEnv, "dra-nccl-env", true, "with --dra: prepared claims also give their containers NCCL_IB_HCA (the claims' RDMA devices) and NCCL_IB_GID_INDEX (their RoCE v2 IPv4 GID index), except variables a container sets itself in env (read from the pod: needs pods get); false: neither")
	fs.StringVar(&f.cdiDir, "cdi-dir", dra.DefaultCDIDir, "with --dra: directory the container runtime reads CDI specs from; one spec per prepared claim is written here")
}

// apiServices is what the agent runs with API access: the node annotation
// always, the ResourceSlice publisher and the DRA kubelet plugin with --dra.
type apiServices struct {
	f      apiFlags
	client kubernetes.Interface
	ann    *agent.NodeAnnotator
	pub    *dra.Publisher
	drv    *dra.Driver
	pr     *dra.PodResources
	events *dra.KubeEvents
}

// newAPIServices builds them; nil without API access (no --dra, no
// --kubeconfig). fatal ends the agent (the kubelet plugin's gRPC service
// failed for good).
func newAPIServices(f apiFlags, nodeName, sysfsRoot, devInfoDir, podResources string, fatal func(error), log *slog.Logger) (*apiServices, error) {
	if !f.dra && f.kubeconfig == "" {
		return nil, nil
	}
	client, err := dra.NewClient(f.kubeconfig)
	if err != nil {
		return nil, err
	}
	s := &apiServices{f: f, client: client}
	if s.ann, err = agent.NewNodeAnnotator(client, nodeName, log); err != nil {
		return nil, err
	}
	if !f.dra {
		return s, nil
	}
	if podResources == "" {
		podResources = dra.DefaultPodResourcesSocket
	}
	s.pr = &dra.PodResources{Socket: podResources}
	// Every PodResources answer tells the claims registry what kubelet has
	// recorded (a device-plugin Allocate stops counting as a hold once its
	// pod is listed), and the publisher taints what pods hold through the
	// device plugin, so the scheduler allocates those devices to no claim.
	claimed := dra.NewClaimed()
	users := dra.ObservingUsers{DevicePluginUsers: s.pr, Claimed: claimed}
	if s.pub, err = dra.NewPublisher(dra.PublisherOptions{Client: client, NodeName: nodeName, SysfsRoot: sysfsRoot, Logger: log, InUse: users}); err != nil {
		return nil, err
	}
	if f.stateDir == "" {
		f.stateDir = f.pluginDir
	}
	s.events = dra.NewKubeEvents(client, nodeName)
	s.drv, err = dra.NewDriver(dra.DriverOptions{NodeName: nodeName, CDIDir: f.cdiDir, StateDir: f.stateDir, DevInfoDir: devInfoDir,
		DevicePlugin: users, Claimed: claimed, NCCLEnv: f.ncclEnv, Fatal: fatal, Logger: log, HealthEvents: s.events})
	return s, err
}

// The agent's metrics count prepared DRA devices' health transitions (wire).
var _ dra.HealthObserver = (*agentmetrics.Metrics)(nil)

// wire hooks the services into the agent's options.
func (s *apiServices) wire(o *agent.Options) {
	if s.drv != nil {
		o.Guard = s.drv.Claimed()
		// the agent's metrics (--metrics-addr) count prepared devices' health transitions
		if obs, ok := o.Observer.(dra.HealthObserver); ok {
			s.drv.ObserveHealth(obs)
		}
	}
	o.Snapshots = func(snap *agent.Snapshot) {
		s.ann.Observe(snap.Node.RDMANetnsMode)
		if s.pub != nil {
			_ = s.pub.Update(snap.Node, snap.Pools) // Update logs its errors
			s.drv.Update(snap.Node, snap.Pools)
		}
	}
}

// start runs them until ctx ends. The returned func stops them.
func (s *apiServices) start(ctx context.Context) (func(), error) {
	go s.ann.Run(ctx)
	if s.pub == nil {
		return func() {}, nil
	}
	s.pub.Start(ctx)
	h, err := s.drv.Start(ctx, s.client, dra.PluginPaths{RegistrarDir: s.f.registrarDir, PluginDir: s.f.pluginDir})
	if err != nil {
		s.pub.Stop()
		return nil, err
	}
	return func() { h.Stop(); s.pub.Stop(); _ = s.pr.Close(); s.events.Shutdown() }, nil
}
