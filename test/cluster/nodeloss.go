package cluster

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// NodeDown crashes node name as a machine crashes: every process of the
// node (kubelet, kube-proxy, containerd, shims, pods) is killed at once with
// SIGKILL (no pod is deleted through the API, no CNI DEL runs), and its Node
// object is deleted, as a cloud's node lifecycle
// controller does for a machine that is gone. The node's namespaces, state
// directory and simulated hardware stay for NodeUp. The first node carries
// the control plane and cannot go down.
func NodeDown(ctx context.Context, l Layout, name string, out io.Writer) error {
	n, st, err := l.clusterNode(name)
	if err != nil {
		return err
	}
	if n.ControlPlane() {
		return fmt.Errorf("node %s runs the control plane; take down one of the others (%s)", n.Name, otherNames(st.Nodes, n))
	}
	start := time.Now()
	ctl := NewNodeControl(l, n)
	if _, err := ctl.Status(ctx); err == nil {
		fmt.Fprintf(out, "cluster-node-down: crashing %s: its kubelet, kube-proxy, containerd and pods killed at once\n", n.Name)
		if err := ctl.Crash(ctx); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if pid, err := readPID(l.NodePIDFile(n)); err == nil {
		waitExit(pid, 90*time.Second)
	}
	k := l.Kubectl(st)
	fmt.Fprintf(out, "cluster-node-down: deleting Node %s\n", n.Name)
	if err := k.run(ctx, out, "delete", "node", n.Name, "--ignore-not-found", "--wait=false"); err != nil {
		return err
	}
	fmt.Fprintf(out, "cluster-node-down: %s is down (%.1fs); bring it back with make cluster-node-up NODE=%s\n", n.Name, time.Since(start).Seconds(), n.Name)
	return nil
}

// NodeUp starts node name again after NodeDown: its supervisor, containerd
// (with the images it had), kubelet (which registers the Node anew) and
// kube-proxy, and waits until the Node is Ready and rdmanet's pod on it runs.
func NodeUp(ctx context.Context, l Layout, name string, out io.Writer) error {
	n, st, err := l.clusterNode(name)
	if err != nil {
		return err
	}
	start := time.Now()
	ctl := NewNodeControl(l, n)
	if _, err := ctl.Status(ctx); err != nil {
		made, err := restoreVFLinks(n)
		if err != nil {
			return err
		}
		if len(made) > 0 {
			fmt.Fprintf(out, "cluster-node-up: %s's links lost in the crash recreated (as at boot): %v\n", n.Name, made)
		}
		fmt.Fprintf(out, "cluster-node-up: starting %s\n", n.Name)
		if err := l.startSupervisor(n, st.Forward); err != nil {
			return err
		}
	}
	if err := waitComponents(ctx, ctl, "", 5*time.Minute); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	k := l.Kubectl(st)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, err := k.Output(ctx, "get", "node", n.Name); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s did not register in 3m; see %s", n.Name, l.NodeLog(n, "kubelet"))
		}
		time.Sleep(time.Second)
	}
	if err := k.run(ctx, out, "wait", "--for=condition=Ready", "node/"+n.Name, "--timeout=180s"); err != nil {
		return fmt.Errorf("node %s not Ready: %w (see %s)", n.Name, err, l.NodeLog(n, "kubelet"))
	}
	fmt.Fprintf(out, "cluster-node-up: %s is Ready (%.1fs)\n", n.Name, time.Since(start).Seconds())
	return nil
}

func (l Layout) clusterNode(name string) (Node, State, error) {
	st, err := ReadState(l.Dir)
	if err != nil {
		return Node{}, st, err
	}
	n, err := FindNode(st.Nodes, name)
	return n, st, err
}

func otherNames(nodes []Node, not Node) string {
	var names []string
	for _, n := range nodes {
		if n.Name != not.Name {
			names = append(names, n.Name)
		}
	}
	return strings.Join(names, ", ")
}
