package agent

// The Node annotation against a real kube-apiserver (test/apiserver;
// without the binaries it skips, with CI=true it fails), written with no
// more rights than deploy/rbac-agent.yaml grants the agent.

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rdmanet/rdmanet/test/apiserver"
)

// TestMain stops the API server the tests share (apiserver.Shared).
func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.StopShared()
	os.Exit(code)
}

// applyAgentRBAC creates the ClusterRoles and bindings of deploy/rbac-agent.yaml.
func applyAgentRBAC(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	if err := apiserver.ApplyRBACFile(ctx, admin, "deploy/rbac-agent.yaml"); err != nil {
		t.Fatal(err)
	}
}

// TestNodeAnnotationAPIServer: the agent annotates its Node with the RDMA
// netns mode: retrying while it lacks the rights, then once the RBAC of
// deploy/rbac-agent.yaml is there; again when the mode changes; never for an unknown
// mode; and not at all (no write) when the Node already says so.
func TestNodeAnnotationAPIServer(t *testing.T) {
	srv := apiserver.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	const node = "annotated-node"
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:rdmanet-system:rdmanet-daemon"}
	client := kubernetes.NewForConfigOrDie(cfg)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	get := func() *corev1.Node {
		t.Helper()
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	wait := func(want string) *corev1.Node {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if n := get(); n.Annotations[AnnotationNetnsMode] == want {
				return n
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("annotation %s is %q, want %q", AnnotationNetnsMode, get().Annotations[AnnotationNetnsMode], want)
		return nil
	}

	a, err := NewNodeAnnotator(client, node, log)
	if err != nil {
		t.Fatal(err)
	}
	a.RetryInterval = 100 * time.Millisecond
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.Run(runCtx); close(done) }()

	a.Observe("exclusive") // forbidden yet: retried
	time.Sleep(300 * time.Millisecond)
	if v := get().Annotations[AnnotationNetnsMode]; v != "" {
		t.Fatalf("annotated %q without the rights", v)
	}
	applyAgentRBAC(t, ctx, admin)
	wait("exclusive")

	a.Observe("unknown")
	a.Observe("shared")
	n := wait("shared")
	a.Observe("shared")
	a.Observe("unknown")
	time.Sleep(300 * time.Millisecond)
	if got := get(); got.ResourceVersion != n.ResourceVersion || got.Annotations[AnnotationNetnsMode] != "shared" {
		t.Errorf("node written again (rv %s -> %s, annotation %q) though the mode did not change", n.ResourceVersion, got.ResourceVersion, got.Annotations[AnnotationNetnsMode])
	}
	stopRun()
	<-done

	// an agent restart: the Node already says "shared", nothing is written
	a2, err := NewNodeAnnotator(client, node, log)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun = context.WithCancel(ctx)
	defer stopRun()
	go a2.Run(runCtx)
	a2.Observe("shared")
	time.Sleep(300 * time.Millisecond)
	if got := get(); got.ResourceVersion != n.ResourceVersion {
		t.Errorf("restarted annotator rewrote the node (rv %s -> %s)", n.ResourceVersion, got.ResourceVersion)
	}
	a2.Observe("exclusive")
	wait("exclusive")
}

// TestNewNodeAnnotator: the inputs it refuses, with a fix.
func TestNewNodeAnnotator(t *testing.T) {
	tests := []struct {
		name   string
		client kubernetes.Interface
		node   string
		want   string
	}{
		{name: "no client", node: "n", want: "no API client"},
		{name: "no node name", client: kubernetes.NewForConfigOrDie(&rest.Config{Host: "https://127.0.0.1:1"}), want: "fix: set --node-name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewNodeAnnotator(tc.client, tc.node, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewNodeAnnotator: %v, want %q", err, tc.want)
			}
		})
	}
}
