package bench

// What a batch is checked for once Running: net1 in every pod (on the
// right PF of its node), the spread over the nodes, the kubelet's sandbox
// retries; and what a batch that did not come up is described with.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmanet/rdmanet/test/cluster"
)

// checkNet1 execs `ip link show` of the row's interface in every pod of
// the batch (selector sel), four at a time: net1, or eth0 for plain pods.
// In shared mode net1 must also be a child of the shared HCA's PF of the
// pod's node: busybox's ip has no -d and sysfs does not name the link type,
// but a macvlan's iflink is its lower device's ifindex (the PF's, in the
// node). With several nodes every node must hold some of the batch's pods
// (the pods' spread constraint).
func (e *env) checkNet1(ctx context.Context, r Row, sel string) error {
	list, err := e.cs.CoreV1().Pods(e.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list pods %s: %w", sel, err)
	}
	iface := "net1"
	if r.Network() == "" {
		iface = "eth0"
	}
	cmd := []string{"ip", "link", "show", iface}
	pfIndex := map[string]string{} // node -> the shared PF's ifindex there
	perNode := map[string]int{}
	for _, p := range list.Items {
		perNode[p.Spec.NodeName]++
	}
	if len(list.Items) >= len(e.st.Nodes) {
		for _, n := range e.st.Nodes {
			if perNode[n.Name] == 0 {
				return fmt.Errorf("no pod of the batch on node %s (pods per node %v): the spread constraint did not hold", n.Name, perNode)
			}
		}
	}
	if r.Mode == ModeShared {
		for _, n := range e.st.Nodes {
			out, err := cluster.NewNodeControl(e.l, n).Exec(ctx, "ip", "-o", "link", "show", cluster.SharedPF)
			if err != nil {
				return fmt.Errorf("ip link show %s in node %s: %w", cluster.SharedPF, n.Name, err)
			}
			idx, _, _ := strings.Cut(out, ":")
			pfIndex[n.Name] = strings.TrimSpace(idx)
		}
		cmd = []string{"sh", "-c", "ip link show net1 && cat /sys/class/net/net1/iflink"}
	}
	sem := make(chan struct{}, 4)
	errs := make([]error, len(list.Items))
	var wg sync.WaitGroup
	for i, p := range list.Items {
		wg.Add(1)
		go func(i int, name, node string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			out, err := e.k.Output(c, append([]string{"-n", e.cfg.Namespace, "exec", name, "--"}, cmd...)...)
			if err != nil {
				errs[i] = fmt.Errorf("pod %s on %s: %w", name, node, err)
				return
			}
			if want, ok := pfIndex[node]; ok {
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if got := strings.TrimSpace(lines[len(lines)-1]); got != want {
					errs[i] = fmt.Errorf("pod %s on %s: net1's lower link is ifindex %s, want %s (%s, the shared HCA's PF)", name, node, got, want, cluster.SharedPF)
				}
			}
		}(i, p.Name, p.Spec.NodeName)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sandboxFailures counts FailedCreatePodSandBox events of the batch's pods
// (a failed CNI ADD the kubelet retried); "" when there were none.
func (e *env) sandboxFailures(ctx context.Context, batchID string, objs []*corev1.Pod) string {
	evs, err := e.cs.CoreV1().Events(e.cfg.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreatePodSandBox"})
	if err != nil {
		return "events: " + err.Error()
	}
	mine := map[string]bool{}
	for _, p := range objs {
		mine[p.Name] = true
	}
	var n int32
	var msg string
	for _, ev := range evs.Items {
		if mine[ev.InvolvedObject.Name] {
			n += max(ev.Count, 1)
			msg = ev.Message
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d failed sandbox creations (kubelet retried), last: %s", n, msg)
}

// describe is the batch's pods' phases and the namespace's recent events,
// for a batch that did not come up.
func (e *env) describe(ctx context.Context, sel string) string {
	var b strings.Builder
	list, err := e.cs.CoreV1().Pods(e.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err == nil {
		for _, p := range list.Items {
			fmt.Fprintf(&b, "  %s: %s", p.Name, p.Status.Phase)
			for _, c := range p.Status.Conditions {
				if c.Status != corev1.ConditionTrue && c.Message != "" {
					fmt.Fprintf(&b, " [%s: %s]", c.Type, c.Message)
				}
			}
			b.WriteString("\n")
		}
	}
	ev, _ := e.k.Output(ctx, "-n", e.cfg.Namespace, "get", "events", "--sort-by=.lastTimestamp")
	lines := strings.Split(strings.TrimRight(ev, "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	b.WriteString("events:\n" + strings.Join(lines, "\n"))
	return b.String()
}
