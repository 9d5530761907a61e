package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	"github.com/rdmanet/rdmanet/internal/pairprobe"
)

// Where the default probe image is read: the rdmanet-node DaemonSet.
const (
	RdmanetNamespace = "rdmanet-system"
	NodeDaemonSet    = "rdmanet-node"
	// ProbeBinary is the probe in rdmanet's image.
	ProbeBinary = "/opt/rdmanet/bin/rdmanet-probe"
	// ProbeContainerPrefix starts the ephemeral containers' names.
	ProbeContainerPrefix = "rdma-probe-"
)

// ErrTooFewPods: fewer than two running pods with a training network.
var ErrTooFewPods = errors.New("fewer than two pods")

// PairRunner runs the pair layer against a cluster: responders as ephemeral
// containers in every pod, then clients, then their logs.
type PairRunner struct {
	G *Gatherer
	// ProbeImage overrides the image read from the rdmanet-node DaemonSet.
	ProbeImage string
	Port       int
	// Progress gets one line per step (nil: none).
	Progress io.Writer
	// Poll is the interval the pods' ephemeral container statuses are read
	// at (default 250ms).
	Poll time.Duration
	// RunID names this run's containers (default: from the clock).
	RunID string
	// Client tunes the probe clients (Self, Port, Targets are set per pod).
	Client pairprobe.ClientConfig
}

func (r *PairRunner) progress(format string, a ...any) {
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, "verify: "+format+"\n", a...)
	}
}

// ProbeImageFor returns the image of the rdmanet-node DaemonSet's agent
// container (its first container otherwise).
func (r *PairRunner) probeImage(ctx context.Context) (string, error) {
	if r.ProbeImage != "" {
		return r.ProbeImage, nil
	}
	ds, err := r.G.Client.AppsV1().DaemonSets(RdmanetNamespace).Get(ctx, NodeDaemonSet, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the probe image defaults to daemonset %s/%s's: %w; fix: pass --probe-image rdmanet/rdmanet:<version> (the image rdmanet was installed from)", RdmanetNamespace, NodeDaemonSet, err)
	}
	cs := ds.Spec.Template.Spec.Containers
	for _, c := range cs {
		if c.Name == "rdmanet-agent" {
			return c.Image, nil
		}
	}
	if len(cs) == 0 || cs[0].Image == "" {
		return "", fmt.Errorf("daemonset %s/%s has no container image; fix: pass --probe-image", RdmanetNamespace, NodeDaemonSet)
	}
	return cs[0].Image, nil
}

// Run verifies every ordered pair of pods (already listed for target t in
// namespace ns). An error means the layer could not run (bad input, API
// refused): exit 2.
func (r *PairRunner) Run(ctx context.Context, ns string, t Target, pods []corev1.Pod) (*PairReport, error) {
	start := time.Now()
	members, skipped, err := PairMembers(pods)
	if err != nil {
		return nil, err
	}
	if len(members) < 2 {
		return nil, fmt.Errorf("%s in namespace %s has %d running pod(s) with a training network: a pair needs two; fix: verify a workload with two or more running pods, or give --pairs=false to check the pod alone: %w", t, ns, len(members), ErrTooFewPods)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	// The networks' plans.
	plans := map[string]NetPlan{}
	var nets []string
	for _, m := range members {
		for _, a := range m.Attachments {
			if _, ok := plans[a.Network]; ok {
				continue
			}
			nets = append(nets, a.Network)
			nns, name := ns, a.Network
			if x, y, ok := cutSlash(a.Network); ok {
				nns, name = x, y
			}
			nad, err := r.G.nad(ctx, nns, name)
			note := ""
			switch {
			case err != nil:
				note = fmt.Sprintf("NAD %s unreadable (%v): subnets from the pods' interfaces", a.Network, err)
			case nad == nil:
				note = fmt.Sprintf("NAD %s not found (deleted after the pods started?): subnets from the pods' interfaces", a.Network)
			}
			plans[a.Network] = PlanFromNAD(a.Network, nad, note, members)
		}
	}
	sort.Strings(nets)
	spread, eligible := r.spread(ctx, members, byName)
	img, err := r.probeImage(ctx)
	if err != nil {
		return nil, err
	}
	nodes := map[string]bool{}
	for _, m := range members {
		nodes[m.Node] = true
	}
	r.progress("%s: %d pods on %d nodes, %d ordered pairs, networks %v; probe image %s", t, len(members), len(nodes), len(members)*(len(members)-1), nets, img)

	id := r.RunID
	if id == "" {
		id = strconv.FormatInt(time.Now().UnixNano()/1e6%(36*36*36*36*36*36), 36)
	}
	port := r.Port
	if port == 0 {
		port = pairprobe.DefaultPort
	}
	maxWait := int64(5 * 60 * 1000)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = time.Until(dl).Milliseconds() + 10000
	}
	serveName, clientName := ProbeContainerPrefix+"s-"+id, ProbeContainerPrefix+"c-"+id
	outcomes := map[string]ProbeOutcome{}
	var mu sync.Mutex
	setOutcome := func(pod string, f func(*ProbeOutcome)) {
		mu.Lock()
		defer mu.Unlock()
		o := outcomes[pod]
		f(&o)
		outcomes[pod] = o
	}

	// Phase 1: responders.
	r.progress("starting probe responders (ephemeral container %s) in %d pods", serveName, len(members))
	err = r.each(ctx, members, func(ctx context.Context, m Member) error {
		addrs, peers := Listeners(members, m.Index)
		cfg, _ := json.Marshal(pairprobe.ServeConfig{Self: m.Pod, Listen: addrs, Port: port, Expect: peers, MaxWaitMS: maxWait})
		return r.addEphemeral(ctx, ns, m.Pod, serveName, img, []string{ProbeBinary, "serve", string(cfg)})
	})
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	err = r.waitAll(ctx, ns, members, serveName, false, func(pod, why string) {
		setOutcome(pod, func(o *ProbeOutcome) { o.ResponderErr = why })
	})
	if err != nil {
		return nil, err
	}
	r.progress("responders running in %d pods (%.1fs)", len(members), time.Since(t1).Seconds())

	// Phase 2: clients.
	r.progress("starting probe clients (ephemeral container %s) in %d pods", clientName, len(members))
	err = r.each(ctx, members, func(ctx context.Context, m Member) error {
		cc := r.Client
		cc.Self, cc.Port, cc.Targets = m.Pod, port, PlanTargets(members, m.Index, plans)
		cfg, _ := json.Marshal(cc)
		return r.addEphemeral(ctx, ns, m.Pod, clientName, img, []string{ProbeBinary, "client", string(cfg)})
	})
	if err != nil {
		return nil, err
	}
	t2 := time.Now()
	err = r.waitAll(ctx, ns, members, clientName, true, func(pod, why string) {
		setOutcome(pod, func(o *ProbeOutcome) { o.Err = why })
	})
	if err != nil {
		return nil, err
	}
	r.progress("clients done in %d pods (%.1fs); reading their logs", len(members), time.Since(t2).Seconds())

	lr := r.G.Logs
	if lr == nil {
		lr = ClientLogs{Client: r.G.Client}
	}
	_ = r.each(ctx, members, func(ctx context.Context, m Member) error {
		if outcomes[m.Pod].Err != "" {
			return nil
		}
		log, err := lr.Logs(ctx, ns, m.Pod, clientName)
		res, perr := parseClientLog(log, err)
		setOutcome(m.Pod, func(o *ProbeOutcome) { o.Results, o.Err = res, perr })
		return nil
	})
	cells, place := AssemblePairs(members, plans, byName, spread, eligible, outcomes)
	rep := &PairReport{Namespace: ns, Target: t.String(), ProbeImage: img, Members: members, Placement: place, Skipped: skipped, Cells: cells}
	if rep.Skipped == nil {
		rep.Skipped = []string{}
	}
	for _, n := range nets {
		rep.Networks = append(rep.Networks, plans[n])
	}
	rep.DurationMS = time.Since(start).Milliseconds()
	rep.Summarise()
	r.progress("%d pairs probed in %.1fs: %d ok, %d problem, %d unknown", len(cells), time.Since(start).Seconds(), rep.Summary.OK, rep.Summary.Problem, rep.Summary.Unknown)
	return rep, nil
}

func cutSlash(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

// spread counts the members per node and, when a pod carries a hostname
// spread constraint with DoNotSchedule, the nodes eligible for it (nodes
// with the hostname label matching the pod's nodeSelector; on error: 0,
// meaning the nodes holding members).
func (r *PairRunner) spread(ctx context.Context, members []Member, pods map[string]*corev1.Pod) (map[string]int, int) {
	counts := map[string]int{}
	var any *corev1.Pod
	for _, m := range members {
		counts[m.Node]++
		p := pods[m.Pod]
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.TopologyKey == HostnameKey && c.WhenUnsatisfiable == corev1.DoNotSchedule {
				any = p
			}
		}
	}
	if any == nil {
		return counts, 0
	}
	list, err := r.G.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(any.Spec.NodeSelector).String()})
	if err != nil {
		return counts, 0
	}
	n := 0
	for _, node := range list.Items {
		if _, ok := node.Labels[HostnameKey]; ok && !node.Spec.Unschedulable {
			n++
		}
	}
	return counts, n
}

// each runs f for every member, at most 8 at once; the first error wins.
func (r *PairRunner) each(ctx context.Context, members []Member, f func(context.Context, Member) error) error {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, m := range members {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(ctx, m); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// addEphemeral adds the probe container to the pod (pods/ephemeralcontainers),
// retrying on conflicts. The container runs as nobody without capabilities
// (it binds a UDP port above 1024 and sends datagrams): admitted by the
// restricted Pod Security level.
func (r *PairRunner) addEphemeral(ctx context.Context, ns, pod, name, image string, command []string) error {
	no, yes, nobody := false, true, int64(65534)
	ec := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Command: command,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: &yes, RunAsUser: &nobody, RunAsGroup: &nobody, AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}}
	pods := r.G.Client.CoreV1().Pods(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec)
		_, err = pods.UpdateEphemeralContainers(ctx, pod, p, metav1.UpdateOptions{})
		return err
	})
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("add ephemeral container %s to pod %s/%s: %w; fix: the probe needs RBAC to update pods/ephemeralcontainers (and get pods/log) in namespace %s", name, ns, pod, err, ns)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("add ephemeral container %s to pod %s/%s: %w; fix: the pod went away: run verify again once the workload is running", name, ns, pod, err)
	case err != nil:
		return fmt.Errorf("add ephemeral container %s to pod %s/%s: %w (ephemeral containers need Kubernetes 1.25 or later)", name, ns, pod, err)
	}
	return nil
}

// pullFailures are waiting reasons that will not resolve by waiting.
var pullFailures = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}

// waitAll polls the pods until container name runs (or, with terminated,
// has ended) in each. A container that ended early (responder) or failed
// (client) is reported through failed; a container that cannot start (image
// pull) fails the run.
func (r *PairRunner) waitAll(ctx context.Context, ns string, members []Member, name string, terminated bool, failed func(pod, why string)) error {
	poll := r.Poll
	if poll == 0 {
		poll = 250 * time.Millisecond
	}
	pending := map[string]bool{}
	for _, m := range members {
		pending[m.Pod] = true
	}
	lastReport := time.Now()
	for {
		for pod := range pending {
			p, err := r.G.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				return fmt.Errorf("read pod %s/%s: %w", ns, pod, err)
			}
			var st *corev1.ContainerStatus
			for i := range p.Status.EphemeralContainerStatuses {
				if p.Status.EphemeralContainerStatuses[i].Name == name {
					st = &p.Status.EphemeralContainerStatuses[i]
				}
			}
			switch {
			case st == nil:
			case st.State.Waiting != nil && pullFailures[st.State.Waiting.Reason]:
				return fmt.Errorf("ephemeral container %s in pod %s/%s (node %s) cannot start: %s: %s; fix: the probe image %s must be pullable on every node (it defaults to the rdmanet-node DaemonSet's, which each node already has; pass --probe-image otherwise)", name, ns, pod, p.Spec.NodeName, st.State.Waiting.Reason, st.State.Waiting.Message, st.Image)
			case st.State.Terminated != nil:
				tm := st.State.Terminated
				if !terminated || tm.ExitCode != 0 {
					failed(pod, fmt.Sprintf("container %s exited %d (%s) %s", name, tm.ExitCode, tm.Reason, firstLine(tm.Message)))
				}
				delete(pending, pod)
			case st.State.Running != nil && !terminated:
				delete(pending, pod)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Since(lastReport) > 5*time.Second {
			lastReport = time.Now()
			var left []string
			for p := range pending {
				left = append(left, p)
			}
			sort.Strings(left)
			r.progress("waiting for %s in %d pods: %v", name, len(left), left)
		}
		select {
		case <-ctx.Done():
			var left []string
			for p := range pending {
				left = append(left, p)
			}
			sort.Strings(left)
			return fmt.Errorf("--timeout reached waiting for ephemeral container %s in pods %v of namespace %s: %w; fix: kubectl describe pod shows why it has not run; give a longer --timeout", name, left, ns, ctx.Err())
		case <-time.After(poll):
		}
	}
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// parseClientLog reads a client container's log into results by peer and
// network.
func parseClientLog(log string, readErr error) (map[string]map[string]pairprobe.Result, string) {
	if readErr != nil {
		return nil, readErr.Error()
	}
	lines, other, err := pairprobe.ParseOutput(log)
	if err != nil {
		return nil, err.Error()
	}
	res := map[string]map[string]pairprobe.Result{}
	done := false
	for _, l := range lines {
		switch {
		case l.Kind == "result" && l.Result != nil:
			if res[l.Result.Peer] == nil {
				res[l.Result.Peer] = map[string]pairprobe.Result{}
			}
			res[l.Result.Peer][l.Result.Network] = *l.Result
		case l.Kind == "error":
			return nil, l.Error
		case l.Kind == "done":
			done = true
		}
	}
	if !done {
		msg := "the probe client's log has no done line"
		if len(other) > 0 {
			msg += ": " + other[0]
		}
		return res, msg
	}
	return res, ""
}
