package ipamtest

import (
	"context"

	"github.com/rdmanet/rdmanet/internal/ipam/gc"
)

// Cluster is a gc.Cluster with fixed pods and nodes, for tests of gc's
// decisions that need no API server (the kubernetes Cluster is tested on
// the real one).
type Cluster struct {
	PodsByKey map[string]gc.Pod // namespace/name -> pod
	NodeNames map[string]bool
}

func (c *Cluster) Pods(context.Context) (map[string]gc.Pod, error) { return c.PodsByKey, nil }
func (c *Cluster) Nodes(context.Context) (map[string]bool, error)  { return c.NodeNames, nil }
