package bench

// The nodes' RDMA netns mode and their free capacity per resource, which
// the rows wait for.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// PerNode is how many of n pods spread evenly over nodes nodes land on the
// fullest one.
func PerNode(n, nodes int) int {
	if nodes < 1 {
		return n
	}
	return (n + nodes - 1) / nodes
}

// waitFree waits until every node can take its share of n more pods of
// row r: for rows with a resource, allocatable minus what the node's pods
// and claims hold is >= PerNode(n, nodes).
func (e *env) waitFree(ctx context.Context, r Row, n int) error {
	res := r.Resource()
	if r.Mode == ModeDRA {
		res = VFResource // the same VFs, either path
	}
	if res == "" {
		return nil
	}
	need := int64(PerNode(n, len(e.st.Nodes)))
	deadline := time.Now().Add(3 * time.Minute)
	for _, node := range e.st.Nodes {
		for {
			free, alloc, err := e.free(ctx, node.Name, res)
			if err == nil && free >= need {
				break
			}
			if time.Now().After(deadline) {
				if err != nil {
					return err
				}
				return fmt.Errorf("node %s: %d of %d %s free after 3 minutes, the row needs %d there (other pods hold the rest, or the node is not in the mode that serves it)", node.Name, free, alloc, res, need)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// free is node's allocatable res less what its pods (and, for VFs, the
// claims allocated from its DRA pool) hold.
func (e *env) free(ctx context.Context, node, res string) (free, alloc int64, err error) {
	obj, err := e.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("node %s: %w", node, err)
	}
	q := obj.Status.Allocatable[corev1.ResourceName(res)]
	alloc = q.Value()
	list, err := e.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, 0, fmt.Errorf("pods on %s: %w", node, err)
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
		// driver from this node's pool holds them until it is deallocated.
		claims, err := e.cs.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, fmt.Errorf("resource claims: %w", err)
		}
		for _, c := range claims.Items {
			if c.Status.Allocation == nil {
				continue
			}
			for _, d := range c.Status.Allocation.Devices.Results {
				if d.Driver == dra.DriverName && d.Pool == node && strings.HasPrefix(d.Device, "vf-") {
					used++
				}
			}
		}
	}
	return alloc - used, alloc, nil
}

// setNodesMode puts every node's simulated kernel in RDMA netns mode mode
// (what `rdma system set netns <mode>` does on a real node; the agent reads
// it each cycle and serves the mode's pool) and waits until every node
// advertises that pool. Each node's own mode is restored at cleanup.
func (e *env) setNodesMode(ctx context.Context, mode string) error {
	for _, n := range e.st.Nodes {
		rec := netops.NewRecorder(e.l.NodeRecordStateFile(n))
		cur, err := rec.NetnsMode()
		if err != nil {
			return fmt.Errorf("node %s: simulated RDMA netns mode: %w", n.Name, err)
		}
		if cur == mode {
			continue
		}
		e.logf("node %s: RDMA netns mode %s (was %s)", n.Name, mode, cur)
		if err := rec.SetNetnsMode(mode); err != nil {
			return fmt.Errorf("node %s: set simulated RDMA netns mode %s: %w", n.Name, mode, err)
		}
		e.onCleanup(func(context.Context) error {
			e.logf("node %s: RDMA netns mode back to %s", n.Name, cur)
			if err := rec.SetNetnsMode(cur); err != nil {
				return fmt.Errorf("node %s: restore simulated RDMA netns mode %s: %w", n.Name, cur, err)
			}
			return nil
		})
	}
	return e.waitFree(ctx, Row{Mode: mode}, len(e.st.Nodes))
}
