package bench

// The agent's RDMA netns mode (a DaemonSet roll) and the node's free capacity per resource, which the rows wait for.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/test/cluster"
)

// waitFree waits until the node can take n more pods of row r: for rows
// with a resource, allocatable minus what the node's pods hold is >= n.
func (e *env) waitFree(ctx context.Context, r Row, n int) error {
	res := r.Resource()
	if r.Mode == ModeDRA {
		res = VFResource // the same VFs, either path
	}
	if res == "" {
		return nil
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		free, alloc, err := e.free(ctx, res)
		if err == nil && free >= int64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("node %s: %d of %d %s free after 3 minutes, the row needs %d (other pods hold the rest)", cluster.NodeName, free, alloc, res, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (e *env) free(ctx context.Context, res string) (free, alloc int64, err error) {
	node, err := e.cs.CoreV1().Nodes().Get(ctx, cluster.NodeName, metav1.GetOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("node %s: %w", cluster.NodeName, err)
	}
	q := node.Status.Allocatable[corev1.ResourceName(res)]
	alloc = q.Value()
	list, err := e.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + cluster.NodeName})
	if err != nil {
		return 0, 0, fmt.Errorf("pods on %s: %w", cluster.NodeName, err)
	}
	var used int64
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Requests[corev1.ResourceName(res)]; ok {
				used += q.Value()
			}
		}
	}
	if res == VFResource {
		// VFs allocated through DRA: every allocated claim of rdmanet's
		// driver holds them until it is deallocated
		claims, err := e.cs.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, fmt.Errorf("resource claims: %w", err)
		}
		for _, c := range claims.Items {
			if c.Status.Allocation == nil {
				continue
			}
			for _, d := range c.Status.Allocation.Devices.Results {
				if d.Driver == dra.DriverName && strings.HasPrefix(d.Device, "vf-") {
					used++
				}
			}
		}
	}
	return alloc - used, alloc, nil
}

// setAgentMode makes the rdmanet agent run with --rdma-netns-mode=mode (a
// DaemonSet roll, as testShared does; on a real node the kernel reports the
// mode) and waits until the node advertises the mode's pool. The original
// mode is restored at cleanup.
func (e *env) setAgentMode(ctx context.Context, mode string) error {
	idx, cur, err := e.agentModeArg(ctx)
	if err != nil {
		return err
	}
	want := "--rdma-netns-mode=" + mode
	if cur != want {
		e.logf("rolling rdmanet-node with %s (was %s)", want, cur)
		if err := e.patchAgentArg(ctx, idx, want); err != nil {
			return err
		}
		e.onCleanup(func(ctx context.Context) error {
			i, now, err := e.agentModeArg(ctx)
			if err != nil {
				return err
			}
			if now == cur {
				return nil
			}
			e.logf("rolling rdmanet-node back to %s", cur)
			return e.patchAgentArg(ctx, i, cur)
		})
	}
	return e.waitFree(ctx, Row{Mode: mode}, 1)
}

const agentContainer = "rdmanet-agent"

// agentModeArg finds the agent container's --rdma-netns-mode argument: its
// path in the DaemonSet and its value.
func (e *env) agentModeArg(ctx context.Context) (path, value string, err error) {
	ds, err := e.cs.AppsV1().DaemonSets("rdmanet-system").Get(ctx, "rdmanet-node", metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("daemonset rdmanet-system/rdmanet-node: %w", err)
	}
	for ci, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != agentContainer {
			continue
		}
		for ai, a := range c.Args {
			if strings.HasPrefix(a, "--rdma-netns-mode=") {
				return fmt.Sprintf("/spec/template/spec/containers/%d/args/%d", ci, ai), a, nil
			}
		}
		return "", "", fmt.Errorf("daemonset rdmanet-node: container %s has no --rdma-netns-mode argument (args %v)", agentContainer, c.Args)
	}
	return "", "", fmt.Errorf("daemonset rdmanet-node has no container %s", agentContainer)
}

func (e *env) patchAgentArg(ctx context.Context, path, value string) error {
	patch := fmt.Sprintf(`[{"op": "replace", "path": %q, "value": %q}]`, path, value)
	if _, err := e.k.Output(ctx, "-n", "rdmanet-system", "patch", "daemonset", "rdmanet-node", "--type=json", "-p", patch); err != nil {
		return err
	}
	_, err := e.k.Output(ctx, "-n", "rdmanet-system", "rollout", "status", "daemonset/rdmanet-node", "--timeout=300s")
	return err
}
