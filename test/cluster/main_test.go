//go:build clustertest

package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/test/cluster"
)

// The cluster tier: `make test-cluster` (root). TestMain brings the node up
// through the same binary as `make cluster-up`, runs the scenarios in
// order, and takes it down through `make cluster-down`'s path, which fails
// when the machine differs from before. RDMANET_CLUSTER_KEEP=1 leaves it
// running for a look afterwards.
var (
	layout cluster.Layout
	state  cluster.State
	k      cluster.Kubectl
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "cluster tier: needs root (network and mount namespaces, cgroups); run: sudo make test-cluster")
		return 1
	}
	bin, dir := os.Getenv("RDMANET_CLUSTER_BIN"), os.Getenv("RDMANET_CLUSTER_DIR")
	if bin == "" || dir == "" {
		fmt.Fprintln(os.Stderr, "cluster tier: RDMANET_CLUSTER_BIN and RDMANET_CLUSTER_DIR unset; run it with make test-cluster")
		return 1
	}
	repo, _ := filepath.Abs("../..")
	var err error
	if layout, err = cluster.NewLayout(dir, repo); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nodes := os.Getenv("RDMANET_CLUSTER_NODES")
	if nodes == "" {
		nodes = "1"
	}
	args := []string{"up", "--state-dir", dir, "--repo", repo, "--nodes", nodes}
	if shared := os.Getenv("RDMANET_CLUSTER_SHARED_NODES"); shared != "" {
		args = append(args, "--shared-nodes", shared)
	}
	up := exec.Command(bin, args...)
	up.Stdout, up.Stderr = os.Stdout, os.Stderr
	upErr := up.Run()
	code := 1
	if upErr != nil {
		fmt.Fprintf(os.Stderr, "cluster tier: cluster-up failed: %v\n", upErr)
	} else if state, err = cluster.ReadState(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else if err := cluster.SetRDMANetnsMode(layout, cluster.ModeExclusive); err != nil { // the first node's mode, whatever a reused cluster was left in
		fmt.Fprintln(os.Stderr, err)
	} else {
		k = cluster.Kubectl{Path: state.Kubectl, Kubeconfig: state.Kubeconfig}
		code = m.Run()
	}
	if os.Getenv("RDMANET_CLUSTER_KEEP") == "1" {
		fmt.Fprintf(os.Stderr, "cluster tier: RDMANET_CLUSTER_KEEP=1: left running; export KUBECONFIG=%s\n", state.Kubeconfig)
		return code
	}
	down := exec.Command(bin, "down", "--state-dir", dir, "--repo", repo)
	down.Stdout, down.Stderr = os.Stdout, os.Stderr
	if err := down.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "cluster tier: cluster-down failed or the machine differs: %v\n", err)
		return 1
	}
	return code
}

// ctx is a test's context with a limit.
func ctx(t *testing.T, limit time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return c
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.Output(ctx(t, 5*time.Minute), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func repoPath(p string) string { return filepath.Join(layout.Repo, p) }

func trim(s string) string { return strings.TrimSpace(s) }
