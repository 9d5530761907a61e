package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

const (
	sriovResource  = "example.com/sriov_rdma"
	sharedResource = "rdma/rdma_shared_device_eth"
	// Polls give up after this long: a bound for failing, not a speed
	// requirement (the agent rescans every 500ms; CI machines are loaded).
	pollDeadline = 20 * time.Second
)

var (
	sriovConfig  = filepath.Join("..", "..", "examples", "agent", "sriovdp-config.yaml")
	sharedConfig = filepath.Join("..", "..", "examples", "agent", "nicclusterpolicy.yaml")
)

// ---- logs: kubelet's klog output and the agent's slog output go to the
// running test's log (shown with -v or on failure), never to a finished test.

var (
	logMu  sync.Mutex
	logTB  testing.TB
	logger = funcr.New(func(prefix, args string) { testLog("kubelet", prefix+" "+args) }, funcr.Options{Verbosity: 2})
)

func init() { klog.SetLoggerWithOptions(logger, klog.ContextualLogger(true)) }

func testLog(who, line string) {
	logMu.Lock()
	defer logMu.Unlock()
	if logTB != nil {
		logTB.Log(who + ": " + line)
	}
}

type logWriter struct{}

func (logWriter) Write(p []byte) (int, error) {
	testLog("agent", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func captureLogs(t testing.TB) {
	logMu.Lock()
	logTB = t
	logMu.Unlock()
	t.Cleanup(func() {
		logMu.Lock()
		logTB = nil
		logMu.Unlock()
	})
}

// ---- the node: a sysfs fixture and the agent serving it ----

// node is a fixture sysfs tree with the agent running on it.
type node struct {
	*sysfsfixture.Standard
	DevInfoDir string
	Agent      *agent.Agent
	opts       agent.Options
	stop       func() // stops the running agent
}

// probe stands in for netlink on this machine: eno1 carries the default
// route, and the kernel cannot tell the RDMA netns mode (no RDMA subsystem),
// so the operator's flag decides it.
type probe struct{}

func (probe) DefaultRouteLinks() ([]string, error) { return []string{"eno1"}, nil }
func (probe) RDMANetnsMode() (string, error) {
	return "", errors.New("no RDMA subsystem in this kernel")
}

type nodeOptions struct {
	Fixture   sysfsfixture.StandardOptions
	Configs   []string // config files; default the exclusive example
	NetnsMode string   // default "exclusive"
}

// startNode writes the fixture and runs the agent against it, with
// kubelet's fixed device-plugin dir as its plugin dir. The agent stops (and
// removes its sockets) when the test ends.
func startNode(t testing.TB, o nodeOptions) *node {
	t.Helper()
	root := filepath.Join(t.TempDir(), "sys")
	std, err := sysfsfixture.NewStandard(root, o.Fixture)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Configs) == 0 {
		o.Configs = []string{sriovConfig}
	}
	if o.NetnsMode == "" {
		o.NetnsMode = "exclusive"
	}
	n := &node{Standard: std, DevInfoDir: filepath.Join(t.TempDir(), "devinfo", "dp")}
	n.opts = agent.Options{
		SysfsRoot:     root,
		ConfigPaths:   o.Configs,
		PluginDir:     pluginDir,
		DevInfoDir:    n.DevInfoDir,
		NetnsModeFlag: o.NetnsMode,
		Probe:         probe{},
		Logger:        slog.New(slog.NewTextHandler(logWriter{}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	n.startAgent(t)
	t.Cleanup(n.stopAgent)
	return n
}

// startAgent starts a new agent process-equivalent on the node.
func (n *node) startAgent(t testing.TB) {
	t.Helper()
	a, err := agent.New(n.opts)
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	n.Agent = a
	n.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent.Run: %v", err)
		}
	}
}

// stopAgent stops the running agent (its servers stop, its sockets go).
func (n *node) stopAgent() {
	if n.stop != nil {
		n.stop()
		n.stop = nil
	}
}

// writeConfig writes a pool configuration file for the agent.
func writeConfig(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// vfBDF is the PCI address of VF i of pf, computed from the fixture's layout.
func vfBDF(pf sysfsfixture.Function, i int) string { return sysfsfixture.VFBDF(pf.BDF, i) }

// charDevs lists the /dev/infiniband nodes the fixture wrote for a
// function, read straight from its sysfs directory.
func (n *node) charDevs(t testing.TB, bdf string) []string {
	t.Helper()
	var out []string
	for _, sub := range []string{"infiniband_verbs", "infiniband_mad"} {
		ents, err := os.ReadDir(filepath.Join(n.Devices[bdf], sub))
		if err != nil {
			t.Fatalf("fixture %s: %v", bdf, err)
		}
		for _, e := range ents {
			out = append(out, "/dev/infiniband/"+e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// ---- kubelet: the real device manager behind the real topology manager ----

// kubelet is the part of a kubelet that device plugins talk to, wired as
// pkg/kubelet/cm/container_manager_linux.go wires it: a topology manager,
// the device manager as its hint provider, and the topology manager as the
// pod admit handler that allocates resources.
type kubelet struct {
	t     testing.TB
	ctx   context.Context
	DM    *devicemanager.ManagerImpl
	TM    topologymanager.Manager
	pods  *podSource
	once  sync.Once
	alive atomic.Bool
}

// numaTopology is the fixture node's machine topology as cadvisor reports it.
var numaTopology = []cadvisorapi.Node{{Id: 0}, {Id: 1}}

// podSource is kubelet's view of the pods bound to the node, and whether
// its config sources (API server, files) have all been seen.
type podSource struct {
	mu    sync.Mutex
	pods  []*v1.Pod
	ready atomic.Bool
}

func newPodSource() *podSource {
	s := &podSource{}
	s.ready.Store(true)
	return s
}

func (s *podSource) add(p *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.pods {
		if q.UID == p.UID {
			return
		}
	}
	s.pods = append(s.pods, p)
}

func (s *podSource) active() []*v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*v1.Pod(nil), s.pods...)
}

func (s *podSource) AddSource(string) {}
func (s *podSource) AllReady() bool   { return s.ready.Load() }

type kubeletOptions struct {
	Policy string // topology manager policy; default "none" (kubelet's default)
	// Containers and Running are what the container runtime reports at
	// kubelet start (kubelet restart: the pods' containers keep running).
	Containers containermap.ContainerMap
	Running    sets.Set[string]
}

// startKubelet creates and starts a device manager, which listens on
// /var/lib/kubelet/device-plugins/kubelet.sock after deleting every other
// socket in that directory, exactly as kubelet does at start.
func startKubelet(t testing.TB, pods *podSource, o kubeletOptions) *kubelet {
	t.Helper()
	if o.Policy == "" {
		o.Policy = topologymanager.PolicyNone
	}
	if o.Containers == nil {
		o.Containers = containermap.NewContainerMap()
	}
	if o.Running == nil {
		o.Running = sets.New[string]()
	}
	ctx := klog.NewContext(context.Background(), logger)
	tm, err := topologymanager.NewManager(logger, numaTopology, o.Policy, topologymanager.ContainerTopologyScope, nil)
	if err != nil {
		t.Fatalf("topologymanager.NewManager: %v", err)
	}
	dm, err := devicemanager.NewManagerImpl(logger, numaTopology, tm)
	if err != nil {
		t.Fatalf("devicemanager.NewManagerImpl: %v", err)
	}
	tm.AddHintProvider(logger, dm)
	if err := dm.Start(logger, pods.active, pods, o.Containers, o.Running); err != nil {
		t.Fatalf("device manager Start: %v", err)
	}
	k := &kubelet{t: t, ctx: ctx, DM: dm, TM: tm, pods: pods}
	k.alive.Store(true)
	t.Cleanup(k.Stop)
	return k
}

// Stop stops the device manager (kubelet exiting): its registration socket
// goes away and every plugin connection is closed.
func (k *kubelet) Stop() {
	k.once.Do(func() {
		k.alive.Store(false)
		if err := k.DM.Stop(logger); err != nil {
			k.t.Errorf("device manager Stop: %v", err)
		}
	})
}

// capacity returns what kubelet would put in the node status for res:
// capacity (all devices) and allocatable (healthy ones).
func (k *kubelet) capacity(res string) (int64, int64) {
	c, a, _ := k.DM.GetCapacity(logger)
	cq, aq := c[v1.ResourceName(res)], a[v1.ResourceName(res)]
	return cq.Value(), aq.Value()
}

// waitCapacity polls until kubelet's device manager reports the wanted
// capacity and allocatable for res; it fails after pollDeadline.
func (k *kubelet) waitCapacity(res string, capacity, allocatable int64) {
	k.t.Helper()
	deadline := time.Now().Add(pollDeadline)
	var c, a int64
	for time.Now().Before(deadline) {
		if c, a = k.capacity(res); c == capacity && a == allocatable {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	k.t.Fatalf("kubelet's device manager: %s capacity/allocatable = %d/%d, want %d/%d (waited %s)", res, c, a, capacity, allocatable, pollDeadline)
}

// admit runs kubelet's pod admission for resources (the topology
// manager's Admit, which calls the device manager's Allocate for every
// container) and records the pod as active.
func (k *kubelet) admit(pod *v1.Pod) lifecycle.PodAdmitResult {
	k.t.Helper()
	r := k.TM.Admit(k.ctx, &lifecycle.PodAdmitAttributes{Pod: pod, Operation: lifecycle.AddOperation})
	if r.Admit {
		k.pods.add(pod)
	}
	return r
}

// mustAdmit admits pod or fails the test.
func (k *kubelet) mustAdmit(pod *v1.Pod) {
	k.t.Helper()
	if r := k.admit(pod); !r.Admit {
		k.t.Fatalf("kubelet refused pod %s: %s: %s", pod.Name, r.Reason, r.Message)
	}
}

// runOptions is what the container runtime would be given for the pod's
// first container.
func (k *kubelet) runOptions(pod *v1.Pod) *devicemanager.DeviceRunContainerOptions {
	k.t.Helper()
	opts, err := k.DM.GetDeviceRunContainerOptions(k.ctx, pod, &pod.Spec.Containers[0])
	if err != nil {
		k.t.Fatalf("GetDeviceRunContainerOptions(%s): %v", pod.Name, err)
	}
	return opts
}

// devices returns the device IDs kubelet holds for the pod's first container.
func (k *kubelet) devices(pod *v1.Pod, res string) []string {
	ids := []string{}
	for id := range k.DM.GetDevices(string(pod.UID), pod.Spec.Containers[0].Name)[res] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// ---- pods ----

var podSeq atomic.Int64

// newPod builds a pod with one container asking for n of res.
func newPod(name, res string, n int64) *v1.Pod {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	return &v1.Pod{
		ObjectMeta: metaFor(name),
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:  "train",
			Image: "nccl-tests",
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceName(res): q},
				Limits:   v1.ResourceList{v1.ResourceName(res): q},
			},
		}}},
	}
}

func metaFor(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%s-%d", name, podSeq.Add(1)))}
}

// env returns the value of an environment variable in run options.
func env(o *devicemanager.DeviceRunContainerOptions, name string) (string, bool) {
	for _, e := range o.Envs {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// hostPaths returns the device nodes kubelet would give the container,
// sorted, after checking each is mapped to the same path with rw access.
func hostPaths(t testing.TB, o *devicemanager.DeviceRunContainerOptions) []string {
	t.Helper()
	var out []string
	for _, d := range o.Devices {
		if d.PathInContainer != d.PathOnHost || d.Permissions != "rw" {
			t.Errorf("device %s -> %s (%s): want the same path, rw", d.PathOnHost, d.PathInContainer, d.Permissions)
		}
		out = append(out, d.PathOnHost)
	}
	sort.Strings(out)
	return out
}
