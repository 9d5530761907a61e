// Command rdmanet-bench-cluster measures pod start on the running real node
// of the cluster tier (package test/cluster/bench). Test-only: never
// shipped. `make bench-cluster` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rdmanet/rdmanet/test/cluster/bench"
)

func main() {
	wd, _ := os.Getwd()
	stateDir := flag.String("state-dir", filepath.Join(wd, "_output/cluster"), "the running cluster's state directory")
	repo := flag.String("repo", wd, "the rdmanet checkout (examples/, .tools/)")
	ns := flag.String("namespace", "rdmanet-bench", "namespace created for the run and deleted after it")
	pods := flag.Int("pods", 48, "pods per batch, created at once and spread evenly over the nodes (at most 16 per node: the seed pool's VFs)")
	batches := flag.Int("batches", 5, "runs: batches per row, batch k of every row is run k; the goal is judged in every run")
	rows := flag.String("rows", "plain,exclusive,shared,multus", "rows to run: all, or a comma list of exclusive, dra, plain, shared, multus")
	timeout := flag.Duration("timeout", 5*time.Minute, "how long one batch may take to be Running")
	settle := flag.Duration("settle", 3*time.Second, "pause before each batch, for the previous batch's teardown to settle")
	flag.Parse()
	rs, err := bench.ParseRows(*rows)
	if err != nil {
		fail(err)
	}
	if *pods < 1 || *batches < 1 {
		fail(fmt.Errorf("--pods and --batches must be at least 1"))
	}
	// Interrupted, the run still puts the node back. A dead reader of its
	// output (make's tee killed) must not kill it mid-run either: with
	// SIGPIPE notified, writes to a broken pipe fail with EPIPE instead.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Config{
		StateDir: *stateDir, Repo: *repo, Namespace: *ns, Pods: *pods, Batches: *batches,
		Rows: rs, Timeout: *timeout, Settle: *settle, Out: os.Stdout,
	})
	for _, l := range rep.Lines() {
		fmt.Println(l)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rdmanet-bench-cluster:", err)
	os.Exit(1)
}
