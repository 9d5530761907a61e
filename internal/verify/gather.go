package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// NADGVR is the NetworkAttachmentDefinition resource.
var NADGVR = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}

// Executor runs a command in a pod's container and returns its output.
type Executor interface {
	Exec(ctx context.Context, namespace, pod, container string, command []string) (stdout, stderr string, err error)
}

// LogReader reads a container's log.
type LogReader interface {
	Logs(ctx context.Context, namespace, pod, container string) (string, error)
}

// ClientLogs reads logs through the API server (pods/log).
type ClientLogs struct {
	Client kubernetes.Interface
	// LimitBytes caps what is read (0: 64 MiB).
	LimitBytes int64
}

// Logs implements LogReader.
func (l ClientLogs) Logs(ctx context.Context, ns, pod, container string) (string, error) {
	limit := l.LimitBytes
	if limit == 0 {
		limit = 64 << 20
	}
	rc, err := l.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		return "", fmt.Errorf("read log of pod %s/%s container %s: %w", ns, pod, container, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return "", fmt.Errorf("read log of pod %s/%s container %s: %w", ns, pod, container, err)
	}
	return string(b), nil
}

// Target is what to verify: one pod, the pods of a Job, StatefulSet or
// Deployment, or the pods a label selector matches.
type Target struct {
	Kind     string // pod, job, statefulset, deployment, selector
	Name     string
	Selector string
}

func (t Target) String() string {
	if t.Kind == "selector" {
		return "pods matching -l " + t.Selector
	}
	return t.Kind + "/" + t.Name
}

// ParseTarget reads the command's arguments: POD, pod/NAME, job/NAME,
// statefulset/NAME (sts/NAME), deployment/NAME (deploy/NAME), or no
// argument with a label selector.
func ParseTarget(args []string, selector string) (Target, error) {
	switch {
	case len(args) > 1:
		return Target{}, fmt.Errorf("verify: %d arguments %q: give one pod, job/NAME or statefulset/NAME, or -l SELECTOR", len(args), args)
	case len(args) == 1 && selector != "":
		return Target{}, fmt.Errorf("verify: argument %q and -l %q: give one or the other", args[0], selector)
	case len(args) == 0 && selector == "":
		return Target{}, errors.New("verify: nothing to verify: give a pod, job/NAME, statefulset/NAME or -l SELECTOR")
	case len(args) == 0:
		if _, err := labels.Parse(selector); err != nil {
			return Target{}, fmt.Errorf("verify: -l %q: %w", selector, err)
		}
		return Target{Kind: "selector", Selector: selector}, nil
	}
	kind, name, ok := strings.Cut(args[0], "/")
	if !ok {
		kind, name = "pod", args[0]
	}
	if name == "" {
		return Target{}, fmt.Errorf("verify: %q: no name after the slash", args[0])
	}
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
		return Target{Kind: "pod", Name: name}, nil
	case "job", "jobs", "job.batch":
		return Target{Kind: "job", Name: name}, nil
	case "statefulset", "statefulsets", "sts", "statefulset.apps":
		return Target{Kind: "statefulset", Name: name}, nil
	case "deployment", "deployments", "deploy", "deployment.apps":
		return Target{Kind: "deployment", Name: name}, nil
	}
	return Target{}, fmt.Errorf("verify: %q: kind %q is not pod, job, deploy(ment) or statefulset (sts); fix: write KIND/NAME, e.g. job/face-trainer", args[0], kind)
}

// Gatherer reads the facts of pods from a cluster.
type Gatherer struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	Exec    Executor
	// Logs reads logs for --nccl-logs (nil: ClientLogs over Client).
	Logs LogReader
	// NCCLLogs asks for the pods' logs.
	NCCLLogs bool
	// Container overrides the container picked (PickContainer).
	Container string
}

// Pods lists the target's pods in namespace ns, sorted by name. An error
// means nothing could be checked (API unreachable, not found).
func (g *Gatherer) Pods(ctx context.Context, ns string, t Target) ([]corev1.Pod, error) {
	var sel string
	switch t.Kind {
	case "pod":
		p, err := g.Client.CoreV1().Pods(ns).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get pod %s/%s: %w", ns, t.Name, err)
		}
		return []corev1.Pod{*p}, nil
	case "job":
		j, err := g.Client.BatchV1().Jobs(ns).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get job %s/%s: %w", ns, t.Name, err)
		}
		if j.Spec.Selector == nil {
			return nil, fmt.Errorf("job %s/%s has no spec.selector", ns, t.Name)
		}
		s, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("job %s/%s: spec.selector: %w", ns, t.Name, err)
		}
		sel = s.String()
	case "statefulset":
		s, err := g.Client.AppsV1().StatefulSets(ns).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get statefulset %s/%s: %w", ns, t.Name, err)
		}
		ls, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("statefulset %s/%s: spec.selector: %w", ns, t.Name, err)
		}
		sel = ls.String()
	case "deployment":
		d, err := g.Client.AppsV1().Deployments(ns).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get deployment %s/%s: %w", ns, t.Name, err)
		}
		ls, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("deployment %s/%s: spec.selector: %w", ns, t.Name, err)
		}
		sel = ls.String()
	case "selector":
		sel = t.Selector
	default:
		return nil, fmt.Errorf("verify: unknown target kind %q", t.Kind)
	}
	list, err := g.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s in %s: %w", t, ns, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("%s: no pods in namespace %s (selector %q)", t, ns, sel)
	}
	pods := list.Items
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

// Gather reads the facts of one pod. Errors are recorded in the facts
// (the checks they prevent report unknown); Gather itself does not fail.
func (g *Gatherer) Gather(ctx context.Context, pod *corev1.Pod) *Facts {
	f := &Facts{Pod: pod, NADs: map[string]*NAD{}, LogsWanted: g.NCCLLogs}
	sels, _ := Selections(pod)
	var nadRes []string
	if !pod.Spec.HostNetwork {
		for _, s := range sels {
			key := s.Namespace + "/" + s.Name
			if _, done := f.NADs[key]; done {
				continue
			}
			n, err := g.nad(ctx, s.Namespace, s.Name)
			if err != nil {
				f.NADErr = err
				break
			}
			f.NADs[key] = n
			if n != nil && n.ResourceName != "" {
				nadRes = append(nadRes, n.ResourceName)
			}
		}
	}
	if node := pod.Spec.NodeName; node != "" {
		n, err := g.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			f.NodeErr = fmt.Errorf("get node %s: %w", node, err)
		} else {
			f.Node = n
		}
		list, err := g.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			f.NodePodsErr = fmt.Errorf("list pods on node %s: %w", node, err)
		} else {
			for _, p := range list.Items {
				if p.Spec.NodeName == node { // fake clients ignore field selectors
					f.NodePods = append(f.NodePods, p)
				}
			}
		}
	}
	f.Container = g.Container
	if f.Container == "" {
		f.Container = PickContainer(pod, nadRes)
	}
	switch {
	case pod.Status.Phase != corev1.PodRunning:
		f.ExecErr = fmt.Errorf("pod is %s, not Running", orDash(string(pod.Status.Phase)))
	case g.Exec == nil:
		f.ExecErr = errors.New("no executor")
	default:
		out, stderr, err := g.Exec.Exec(ctx, pod.Namespace, pod.Name, f.Container, Command())
		secs := SplitSections(out)
		switch {
		case err != nil:
			f.ExecErr = fmt.Errorf("%w%s", err, stderrNote(stderr))
		case len(secs) == 0:
			f.ExecErr = fmt.Errorf("the in-pod script printed nothing it knows%s", stderrNote(stderr))
		default:
			f.Exec = secs
		}
	}
	if g.NCCLLogs {
		lr := g.Logs
		if lr == nil {
			lr = ClientLogs{Client: g.Client}
		}
		f.Logs, f.LogsErr = lr.Logs(ctx, pod.Namespace, pod.Name, f.Container)
	}
	return f
}

func stderrNote(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return " (stderr: " + s + ")"
}

// nad reads a NAD; nil, nil when it does not exist.
func (g *Gatherer) nad(ctx context.Context, ns, name string) (*NAD, error) {
	if g.Dynamic == nil {
		return nil, errors.New("no client for network-attachment-definitions")
	}
	u, err := g.Dynamic.Resource(NADGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get NetworkAttachmentDefinition %s/%s: %w", ns, name, err)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: encode: %w", ns, name, err)
	}
	return &NAD{Namespace: ns, Name: name, ResourceName: u.GetAnnotations()[manifest.ResourceNameAnnotation], Raw: raw}, nil
}
