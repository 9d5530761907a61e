//go:build clustertest

package cluster_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rdmanet/rdmanet/internal/install"
)

// testNodeCredentials: what rdmanet leaves on a node's disk is worth that
// node only. No long-lived ServiceAccount token Secret of rdmanet exists;
// the host token file on node A (the CNI fallbacks' credential) may
// annotate A's Node but not B's, and may not touch the network-status of a
// pod on B: the API server's ValidatingAdmissionPolicies (deploy/policy)
// refuse with 403 naming the rule.
func testNodeCredentials(t *testing.T) {
	out := kubectl(t, "get", "secrets", "-A", "--field-selector", "type=kubernetes.io/service-account-token", "-o", "name")
	if strings.TrimSpace(out) != "" {
		t.Errorf("service-account-token Secrets exist (rdmanet's nodes must use bound tokens): %s", out)
	}

	a, b := state.Nodes[0], state.Nodes[1]
	token, err := os.ReadFile(layout.NodeHostPath(a, "/etc/cni/net.d/"+install.HostTokenFile))
	if err != nil {
		t.Fatalf("node %s's host token: %v", a.Name, err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", layout.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = strings.TrimSpace(string(token))
	cs := kubernetes.NewForConfigOrDie(cfg)
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	annotate := func(node string) error {
		_, err := cs.CoreV1().Nodes().Patch(c, node, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"rdmanet.io/credential-check":"`+a.Name+`"}}}`), metav1.PatchOptions{})
		return err
	}
	if err := annotate(a.Name); err != nil {
		t.Errorf("%s's host token annotating its own Node: %v", a.Name, err)
	}
	t.Cleanup(func() {
		_, _ = k.Output(context.Background(), "annotate", "node", a.Name, "rdmanet.io/credential-check-")
	})
	if err := annotate(b.Name); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "rdmanet-node/") {
		t.Errorf("%s's host token annotating %s's Node: %v; want 403 from an rdmanet-node/ policy rule", a.Name, b.Name, err)
	}

	// A pod on B: its network-status is B's to write.
	var onB string
	for _, p := range pods(t, "rdmanet-system", "app.kubernetes.io/name=rdmanet-node") {
		if p.Spec.NodeName == b.Name {
			onB = p.Name
		}
	}
	if onB == "" {
		t.Fatalf("no rdmanet-node pod on %s", b.Name)
	}
	// The write rdmanet's node makes: the annotation through pods/status.
	_, err = cs.CoreV1().Pods("rdmanet-system").Patch(c, onB, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/network-status":"[]"}}}`), metav1.PatchOptions{}, "status")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "rdmanet-node/") {
		t.Errorf("%s's host token patching pod %s on %s: %v; want 403 from an rdmanet-node/ policy rule", a.Name, onB, b.Name, err)
	}
	t.Logf("%s's host token: own Node annotated; %s's Node and pod refused by the policies", a.Name, b.Name)
}
