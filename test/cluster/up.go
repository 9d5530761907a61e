package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Options of cluster-up.
type Options struct {
	Forward string    // the machine's loopback address forwarded to the API server
	Out     io.Writer // progress lines
	GPUs    int       // fixture GPUs per node served by the fake GPU plugin
	Install bool      // install rdmanet with kubectl apply -k (false: bare nodes)
	// Nodes is the number of nodes (default 1); SharedNodes how many of
	// them (the last ones) run the shared RDMA netns mode (default 1 when
	// there are several nodes, else 0; -1 also means the default).
	Nodes       int
	SharedNodes int
}

// State is what a running cluster recorded for later commands.
type State struct {
	Forward    string `json:"forward"`
	Kubectl    string `json:"kubectl"`
	Image      string `json:"image"`
	Kubeconfig string `json:"kubeconfig"`
	Started    string `json:"started"`
	// Nodes is read from nodes.json (the plan every supervisor reads), not
	// stored twice.
	Nodes []Node `json:"-"`
}

func (l Layout) readState() (State, error) {
	var s State
	b, err := os.ReadFile(l.StateFile())
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

// progress prints numbered steps with their duration.
type progress struct {
	out   io.Writer
	start time.Time
	step  time.Time
}

func (p *progress) begin(format string, a ...any) {
	p.step = time.Now()
	fmt.Fprintf(p.out, "cluster-up: %s ...\n", fmt.Sprintf(format, a...))
}

func (p *progress) done() {
	fmt.Fprintf(p.out, "cluster-up:   done in %.1fs (total %.0fs)\n", time.Since(p.step).Seconds(), time.Since(p.start).Seconds())
}

// Up builds what is missing, starts the node, installs rdmanet and waits
// until the node and every rdmanet pod are Ready. A running, healthy
// cluster is reused; a stale state directory (supervisor gone) is refused
// with the command that clears it.
func Up(ctx context.Context, l Layout, o Options) (State, error) {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Forward == "" {
		o.Forward = DefaultForward
	}
	p := &progress{out: o.Out, start: time.Now()}
	if os.Geteuid() != 0 {
		return State{}, errors.New("cluster-up needs root: it creates network namespaces, a mount namespace and cgroups; fix: sudo make cluster-up")
	}
	if st, err := l.readState(); err == nil {
		if _, serr := NewControl(l).Status(ctx); serr == nil {
			fmt.Fprintf(o.Out, "cluster-up: a cluster is already running from %s (started %s); reusing it\n", l.Dir, st.Started)
			if o.Install {
				// kubectl apply is idempotent: this reinstalls rdmanet if
				// it was deleted, and is a no-op otherwise.
				if err := l.Install(ctx, l.Kubectl(st), st.Image, o.Out); err != nil {
					return st, err
				}
			}
			return st, nil
		}
		return State{}, fmt.Errorf("%s holds a cluster whose supervisor is not running (stale, started %s); fix: make cluster-down, then make cluster-up", l.Dir, st.Started)
	}
	if left := clusterNetns(); len(left) > 0 {
		return State{}, fmt.Errorf("network namespaces %s already exist but %s has no cluster; fix: make cluster-down (it removes them)", strings.Join(left, ", "), l.StateFile())
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.SharedNodes < 0 {
		o.SharedNodes = 0
		if o.Nodes > 1 {
			o.SharedNodes = 1
		}
	}
	nodes, err := PlanNodes(o.Nodes, o.SharedNodes)
	if err != nil {
		return State{}, err
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return State{}, fmt.Errorf("%s not found on PATH; fix: apt-get install -y iproute2 iptables", tool)
		}
	}

	before, err := ReadMachine()
	if err != nil {
		return State{}, err
	}
	if err := l.mkdirs(nodes); err != nil {
		return State{}, err
	}
	if err := l.saveNodes(nodes); err != nil {
		return State{}, err
	}

	p.begin("building Kubernetes v1.37.2, CoreDNS and containerd/runc into %s (cold: ~10-20 min; cached: seconds)", l.Tools())
	if err := l.runHost(ctx, o.Out, filepath.Join(l.Repo, "hack/build-k8s-tools.sh"), l.nodeTools()...); err != nil {
		return State{}, err
	}
	if err := l.runHost(ctx, o.Out, filepath.Join(l.Repo, "hack/build-runtime-tools.sh")); err != nil {
		return State{}, err
	}
	p.done()

	p.begin("choosing kubectl")
	kubectl, err := l.kubectl(ctx, o.Out)
	if err != nil {
		return State{}, err
	}
	p.done()

	p.begin("building the node's CNI plugins, the fake GPU plugin and the images")
	if err := l.buildNodeBinaries(ctx, o.Out, nodes); err != nil {
		return State{}, err
	}
	images, simRef, err := l.buildImages(ctx, o.Out)
	if err != nil {
		return State{}, err
	}
	p.done()

	p.begin("writing certificates, configs and each node's sysfs fixture (%d nodes; %d VFs, %d GPUs each)", len(nodes), NumVFs, o.GPUs)
	if err := writePKI(l, nodes); err != nil {
		return State{}, err
	}
	if err := writeKubeconfig(l.AdminKubeconfig(), "https://"+o.Forward, filepath.Join(l.PKI(), "ca.crt"),
		filepath.Join(l.PKI(), "admin.crt"), filepath.Join(l.PKI(), "admin.key")); err != nil {
		return State{}, err
	}
	dns := fileExists(l.binary("coredns"))
	if err := writeConfigs(l, nodes, dns); err != nil {
		return State{}, err
	}
	for _, n := range nodes {
		if err := l.writeNodeHardware(n, o.GPUs); err != nil {
			return State{}, err
		}
	}
	for _, m := range PrivateMounts {
		if !fileExists(m.Target) {
			if err := os.MkdirAll(m.Target, 0o755); err != nil {
				return State{}, fmt.Errorf("create mount point %s: %w", m.Target, err)
			}
			before.Created = append(before.Created, m.Target)
		}
	}
	if err := l.saveSnapshot(before); err != nil {
		return State{}, err
	}
	p.done()

	kubeProxy := fileExists(l.binary("kube-proxy"))
	p.begin("creating the network namespaces of %d nodes and the fabric %s (kube-proxy: %v, CoreDNS: %v)", len(nodes), WireNetns, kubeProxy, dns)
	if err := setupNetwork(nodes, kubeProxy); err != nil {
		_ = teardownNetwork()
		return State{}, err
	}
	if err := createCgroups(nodes); err != nil {
		return State{}, err
	}
	p.done()

	p.begin("starting the control plane and node %s (etcd, kube-apiserver, controller-manager, scheduler, containerd, kubelet)", NodeName)
	if err := l.startSupervisor(nodes[0], o.Forward); err != nil {
		return State{}, err
	}
	st := State{Forward: o.Forward, Kubectl: kubectl, Image: simRef, Kubeconfig: l.AdminKubeconfig(), Started: time.Now().Format(time.RFC3339), Nodes: nodes}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(l.StateFile(), b, 0o644); err != nil {
		return st, fmt.Errorf("write %s: %w", l.StateFile(), err)
	}
	if err := waitComponents(ctx, NewControl(l), "kube-scheduler", 5*time.Minute); err != nil {
		return st, err
	}
	k := l.Kubectl(st)
	if err := l.applyAddons(ctx, k, dns, o.Out); err != nil {
		return st, err
	}
	for _, n := range nodes[1:] {
		if err := l.startSupervisor(n, o.Forward); err != nil {
			return st, err
		}
	}
	p.done()

	p.begin("importing images into each node's containerd")
	for _, n := range nodes {
		ctl := NewNodeControl(l, n)
		if err := waitComponents(ctx, ctl, "containerd", 5*time.Minute); err != nil {
			return st, fmt.Errorf("node %s: %w", n.Name, err)
		}
		for _, img := range images {
			if _, err := ctl.Import(ctx, img); err != nil {
				return st, fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	p.done()

	p.begin("waiting for kubelets and %d nodes Ready", len(nodes))
	for _, n := range nodes {
		if err := waitComponents(ctx, NewNodeControl(l, n), "", 5*time.Minute); err != nil {
			return st, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if err := k.run(ctx, o.Out, "wait", "--for=condition=Ready", "node/"+n.Name, "--timeout=180s"); err != nil {
			return st, fmt.Errorf("node %s not Ready: %w (see %s)", n.Name, err, l.NodeLog(n, "kubelet"))
		}
	}
	p.done()

	if o.Install {
		p.begin("installing rdmanet (%s) with kubectl apply -k", simRef)
		if err := l.Install(ctx, k, simRef, o.Out); err != nil {
			return st, err
		}
		p.done()
	}
	fmt.Fprintf(o.Out, "cluster-up: ready in %.0fs; logs in %s\n", time.Since(p.start).Seconds(), l.Logs())
	return st, nil
}

// nodeTools are the tools hack/build-k8s-tools.sh builds for the cluster:
// kube-proxy and CoreDNS where this checkout has their tool modules.
func (l Layout) nodeTools() []string {
	tools := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"}
	for _, t := range []string{"kube-proxy", "coredns"} {
		if fileExists(filepath.Join(l.Repo, "hack/tools", t, "go.mod")) {
			tools = append(tools, t)
		}
	}
	return tools
}

// startSupervisor starts `rdmanet-cluster supervise` for node n in a new
// mount namespace and session, detached from the caller.
func (l Layout) startSupervisor(n Node, forward string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own executable: %w", err)
	}
	logf, err := os.OpenFile(l.NodeLog(n, "supervisor"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(self, "supervise", "--state-dir", l.Dir, "--repo", l.Repo, "--forward", forward, "--node", n.Name)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Unshareflags: syscall.CLONE_NEWNS}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start supervisor: %w", err)
	}
	_ = os.WriteFile(l.NodePIDFile(n), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644)
	_ = cmd.Process.Release()
	deadline := time.Now().Add(30 * time.Second)
	for !fileExists(l.NodeControlSocket(n)) {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: supervisor did not open %s in 30s; see %s", n.Name, l.NodeControlSocket(n), l.NodeLog(n, "supervisor"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// waitComponents waits until every component up to and including upTo
// ("" = all) runs and is ready.
func waitComponents(ctx context.Context, ctl *Control, upTo string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		st, err := ctl.Status(ctx)
		if err == nil {
			ok := true
			var waiting string
			for _, c := range st.Components {
				if !c.Ready {
					if c.Optional && c.PID == 0 {
						continue // not built: reported by the supervisor's log
					}
					ok, waiting = false, c.Name
					break
				}
				if c.Name == upTo {
					break
				}
			}
			if ok {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node component %s not ready after %s; see its log in the state dir's logs/", waiting, limit)
			}
		} else if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// runHost runs a build step on the machine, its output indented.
func (l Layout) runHost(ctx context.Context, out io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = l.Repo
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// upstreamCNIPlugins are the node's own CNI plugins (what a distribution's
// containernetworking-plugins package puts in /opt/cni/bin).
var upstreamCNIPlugins = []string{
	"github.com/containernetworking/plugins/plugins/main/bridge",
	"github.com/containernetworking/plugins/plugins/main/macvlan",
	"github.com/containernetworking/plugins/plugins/ipam/host-local",
	"github.com/containernetworking/plugins/plugins/meta/portmap",
}

// They are static (CGO_ENABLED=0), as upstream releases them: the daemon
// execs them from inside its container, whose image has no libc.
func (l Layout) buildNodeBinaries(ctx context.Context, out io.Writer, nodes []Node) error {
	for _, n := range nodes {
		args := append([]string{"build", "-o", l.NodeDir(n, "opt/cni/bin") + "/"}, upstreamCNIPlugins...)
		if err := l.runHost(ctx, out, "env", append([]string{"CGO_ENABLED=0", "go"}, args...)...); err != nil {
			return err
		}
	}
	if fileExists(filepath.Join(l.Repo, "test/cluster/fakegpu/cmd/fake-gpu-plugin")) {
		if err := l.runHost(ctx, out, "go", "build", "-o", l.Bin()+"/", "./test/cluster/fakegpu/cmd/fake-gpu-plugin"); err != nil {
			return err
		}
	}
	return nil
}

// buildImages runs `make image-sim image-pause image-testbox` and returns
// the archives and the rdmanet image reference.
func (l Layout) buildImages(ctx context.Context, out io.Writer) ([]string, string, error) {
	if err := l.runHost(ctx, out, "make", "--no-print-directory", "image-sim", "image-pause", "image-testbox"); err != nil {
		return nil, "", err
	}
	archives, _ := filepath.Glob(filepath.Join(l.Repo, "_output/image/*.tar"))
	var keep []string
	version, err := os.ReadFile(filepath.Join(l.Repo, "VERSION"))
	if err != nil {
		return nil, "", fmt.Errorf("VERSION: %w", err)
	}
	tag := strings.TrimSpace(string(version)) + "-sim"
	ref := "rdmanet/rdmanet:" + tag
	for _, a := range archives {
		base := filepath.Base(a)
		if strings.Contains(base, "pause") || strings.Contains(base, "testbox") || strings.Contains(base, tag) {
			keep = append(keep, a)
		}
	}
	if len(keep) < 3 {
		return nil, "", fmt.Errorf("image archives in %s: found %v, want the sim, pause and testbox images", filepath.Join(l.Repo, "_output/image"), archives)
	}
	return keep, ref, nil
}

// ReadState reads the state of the cluster whose state directory is dir,
// with its nodes (readNodes).
func ReadState(dir string) (State, error) {
	l := Layout{Dir: dir}
	st, err := l.readState()
	if err != nil {
		return st, fmt.Errorf("cluster state in %s: %w", dir, err)
	}
	st.Nodes, err = l.readNodes()
	return st, err
}
