package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/rdmanet/rdmanet/internal/inventory"
)

// AnnotationNetnsMode is the Node annotation the agent keeps equal to the
// node's RDMA subsystem netns mode ("exclusive" or "shared"); the
// controller mirrors it into a label.
const AnnotationNetnsMode = "rdmanet.io/rdma-netns-mode"

// NodeAnnotator writes AnnotationNetnsMode on the agent's own Node when the
// mode it observes differs from the Node's. Observe never blocks (the
// agent's Snapshots hook runs under its lock); Run does the API calls and
// retries failures every RetryInterval.
type NodeAnnotator struct {
	client kubernetes.Interface
	node   string
	log    *slog.Logger
	// RetryInterval is how long Run waits after a failed write (default 10s).
	RetryInterval time.Duration

	modes chan string // the latest observed mode; capacity 1
}

// NewNodeAnnotator validates its inputs.
func NewNodeAnnotator(client kubernetes.Interface, nodeName string, log *slog.Logger) (*NodeAnnotator, error) {
	if client == nil {
		return nil, errors.New("node annotation: no API client")
	}
	if nodeName == "" {
		return nil, errors.New("node annotation: node name is empty; fix: set --node-name (or $NODE_NAME from the pod's spec.nodeName)")
	}
	if log == nil {
		log = slog.Default()
	}
	return &NodeAnnotator{client: client, node: nodeName, log: log, RetryInterval: 10 * time.Second, modes: make(chan string, 1)}, nil
}

// Observe hands Run the node's current mode. Only "exclusive" and "shared"
// are written; an unknown mode leaves the annotation as it is.
func (n *NodeAnnotator) Observe(mode string) {
	if mode != inventory.NetnsExclusive && mode != inventory.NetnsShared {
		return
	}
	for {
		select {
		case n.modes <- mode:
			return
		default:
		}
		select { // replace an older, not yet written mode
		case <-n.modes:
		default:
		}
	}
}

// Run writes observed modes until ctx ends.
func (n *NodeAnnotator) Run(ctx context.Context) {
	written, pending := "", ""
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case pending = <-n.modes:
		case <-retry:
		}
		retry = nil
		if pending == "" || pending == written {
			continue
		}
		if err := n.write(ctx, pending); err != nil {
			if ctx.Err() != nil {
				return
			}
			n.log.Error("node annotation not written; retrying", "node", n.node, "annotation", AnnotationNetnsMode, "value", pending, "err", err)
			retry = time.After(n.RetryInterval)
			continue
		}
		written = pending
	}
}

// write patches the annotation when the Node's value differs.
func (n *NodeAnnotator) write(ctx context.Context, mode string) error {
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", n.node, err)
	}
	if node.Annotations[AnnotationNetnsMode] == mode {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationNetnsMode: mode}}})
	if err != nil {
		return err
	}
	if _, err := n.client.CoreV1().Nodes().Patch(ctx, n.node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "rdmanet-agent"}); err != nil {
		return fmt.Errorf("patch node %s annotation %s=%s: %w; fix: the agent's identity needs nodes get and patch (deploy/rbac-agent.yaml)", n.node, AnnotationNetnsMode, mode, err)
	}
	n.log.Info("node annotated", "node", n.node, "annotation", AnnotationNetnsMode, "value", mode, "was", node.Annotations[AnnotationNetnsMode])
	return nil
}
