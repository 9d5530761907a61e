package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// systemNamespaces keep their pods until the end (rdmanet-system's DEL
// path must outlive the workloads).
var systemNamespaces = map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true, "rdmanet-system": true}

// Down removes the workloads (so every CNI DEL runs), uninstalls rdmanet,
// stops the node, deletes its namespaces and cgroups, and checks that the
// machine's links, netns, mounts and processes are as cluster-up found
// them. It reports every difference and fails if there is one. Idempotent:
// parts already gone are skipped. The state directory is removed, except
// logs/, which stays for post-mortems.
func Down(ctx context.Context, l Layout, out io.Writer) error {
	if out == nil {
		out = os.Stdout
	}
	start := time.Now()
	ctl := NewControl(l)
	nodes, nerr := l.readNodes()
	if nerr != nil {
		fmt.Fprintf(out, "cluster-down: warning: %v; stopping the first node only, then whatever runs in a cluster namespace\n", nerr)
		nodes, _ = PlanNodes(1, 0)
	}
	if _, err := ctl.Status(ctx); err == nil {
		if st, err := l.readState(); err == nil {
			k := l.Kubectl(st)
			fmt.Fprintln(out, "cluster-down: deleting workloads (so each pod's CNI DEL runs)")
			if err := deleteWorkloads(ctx, k, out); err != nil {
				fmt.Fprintf(out, "cluster-down: warning: %v\n", err)
			}
			fmt.Fprintln(out, "cluster-down: uninstalling rdmanet (kubectl delete -k)")
			if err := l.Uninstall(ctx, k, out); err != nil {
				fmt.Fprintf(out, "cluster-down: warning: %v\n", err)
			}
		}
	}
	// The other nodes first, the control plane's last: their kubelets
	// keep reporting until they stop.
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		if _, err := NewNodeControl(l, n).Status(ctx); err == nil {
			fmt.Fprintf(out, "cluster-down: stopping node %s\n", n.Name)
			_ = NewNodeControl(l, n).Shutdown(ctx)
		}
		if pid, err := readPID(l.NodePIDFile(n)); err == nil {
			waitExit(pid, 90*time.Second)
		}
	}
	for _, p := range l.leftoverProcesses() {
		fmt.Fprintf(out, "cluster-down: killing leftover %s\n", p)
		if f := strings.Fields(p); len(f) > 1 {
			if pid, err := strconv.Atoi(f[1]); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				waitExit(pid, 10*time.Second)
			}
		}
	}
	var errs []error
	if err := teardownNetwork(); err != nil {
		errs = append(errs, err)
	}
	removeCgroups()
	before, serr := l.loadSnapshot()
	for _, d := range before.Created {
		_ = os.Remove(d) // only if empty: the node's files lived in the state dir
	}
	if serr == nil {
		now, err := ReadMachine()
		if err != nil {
			errs = append(errs, err)
		} else if diff := l.Diff(before, now); len(diff) > 0 {
			for _, d := range diff {
				fmt.Fprintf(out, "cluster-down: DIFFERS: %s\n", d)
			}
			errs = append(errs, fmt.Errorf("the machine differs from before cluster-up in %d ways (listed above)", len(diff)))
		} else {
			fmt.Fprintln(out, "cluster-down: machine checked: links, network namespaces, mounts as before; no node process or cgroup left")
		}
	} else if !errors.Is(serr, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("snapshot %s: %w", l.Snapshot(), serr))
	} else {
		fmt.Fprintln(out, "cluster-down: no cluster state found; checked only for leftover namespaces and processes")
	}
	if err := clearState(l); err != nil {
		errs = append(errs, err)
	}
	fmt.Fprintf(out, "cluster-down: done in %.0fs (logs kept in %s)\n", time.Since(start).Seconds(), l.Logs())
	return errors.Join(errs...)
}

func deleteWorkloads(ctx context.Context, k Kubectl, out io.Writer) error {
	s, err := k.Output(ctx, "get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range strings.Fields(s) {
		if systemNamespaces[ns] {
			continue
		}
		if err := k.run(ctx, out, "-n", ns, "delete", "jobs,deployments,statefulsets,replicasets,daemonsets,pods",
			"--all", "--ignore-not-found", "--wait", "--timeout=120s"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func clearState(l Layout) error {
	ents, err := os.ReadDir(l.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range ents {
		if e.Name() == "logs" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(l.Dir, e.Name())); err != nil {
			return fmt.Errorf("clear %s: %w", l.Dir, err)
		}
	}
	return nil
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func waitExit(pid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); err != nil || isZombie(pid) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// isZombie: a reparented supervisor that exited may stay a zombie until the
// machine's init reaps it; it holds nothing any more.
func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}
