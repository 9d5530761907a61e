package fleetbench

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// ControllerOptions configure the controller phase.
type ControllerOptions struct {
	// Addresses allocated in IPAMBlocks when the controller starts, held by
	// Addresses/Rails pods bound round-robin to the nodes (Rails networks,
	// one address per pod in each).
	Addresses int
	Rails     int
	// Bin is the rdmanet-controller binary (go build ./cmd/rdmanet-controller).
	Bin string
	// Settle: how long the controller runs after its caches synced before
	// its RSS is read.
	Settle time.Duration
}

// ControllerResult is the controller's memory and GC latency.
type ControllerResult struct {
	Addresses, Pods, Blocks int
	// RSS (VmRSS) after Settle and the peak (VmHWM), of the
	// rdmanet-controller process, in bytes.
	RSS, PeakRSS int64
	// GCLatency: from the deletion of a Node with live pods to the release
	// of all their addresses; it includes the controller's node quarantine
	// (DefaultNodeQuarantine, 40 s, Kubernetes' pod GC's).
	GCLatency  time.Duration
	GCReleased int // addresses of the dead node
	SyncS      float64
}

// LeaseQuarantine is internal/controller's DefaultNodeQuarantine.
const nodeQuarantine = 40 * time.Second

func runController(ctx context.Context, o ControllerOptions, api *apiserver.Server, admin kubernetes.Interface, nodes []string, dir string, pr func(string, ...any)) (*ControllerResult, error) {
	if o.Rails <= 0 {
		o.Rails = 8
	}
	if o.Settle <= 0 {
		o.Settle = 20 * time.Second
	}
	if o.Bin == "" {
		return nil, fmt.Errorf("controller phase: no rdmanet-controller binary; fix: go build -o <dir>/ ./cmd/rdmanet-controller and pass its path")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	const ns = "gc"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	r := &ControllerResult{Pods: (o.Addresses + o.Rails - 1) / o.Rails}
	pr("controller: %d pods x %d rails = %d addresses over %d nodes", r.Pods, o.Rails, r.Pods*o.Rails, len(nodes))
	type holder struct {
		name, uid string
	}
	byNode := make([][]holder, len(nodes))
	pods := make([]holder, r.Pods)
	err := parallel(ctx, r.Pods, 48, func(i int) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%06d", i), Namespace: ns},
			Spec: corev1.PodSpec{NodeName: nodes[i%len(nodes)], Containers: []corev1.Container{{Name: "c", Image: "nccl-tests"}}}}
		p, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		pods[i] = holder{p.Name, string(p.UID)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, p := range pods {
		byNode[i%len(nodes)] = append(byNode[i%len(nodes)], p)
	}
	store, err := ipam.NewKubeStore(api.Config())
	if err != nil {
		return nil, err
	}
	// One block per node and rail, holding that node's pods' addresses
	// (what each node's allocator would have written).
	perNode := (r.Pods + len(nodes) - 1) / len(nodes)
	bits := 32 - bitsFor(perNode)
	created := time.Now().UTC().Format(time.RFC3339Nano)
	type blockRef struct {
		rail, node int
	}
	var refs []blockRef
	for rail := range o.Rails {
		for j := range nodes {
			if len(byNode[j]) > 0 {
				refs = append(refs, blockRef{rail, j})
			}
		}
	}
	deadNode := 0
	var deadBlocks []string
	err = parallel(ctx, len(refs), 48, func(k int) error {
		ref := refs[k]
		network := fmt.Sprintf("gc-rail-%d", ref.rail)
		rng := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(16 * ref.rail), 0, 0}), 12)
		base := rng.Addr().As4()
		off := uint32(ref.node) << (32 - bits)
		v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3]) + off
		cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits)
		b := ipam.NewBlock(ipam.Pool{Network: network, Prefix: rng}, cidr, nodes[ref.node])
		a := cidr.Addr().Next()
		for _, h := range byNode[ref.node] {
			b.Spec.Allocations[a.String()] = v1alpha1.Allocation{ContainerID: "sandbox-" + h.uid, IfName: fmt.Sprintf("net%d", ref.rail+1),
				PodNamespace: ns, PodName: h.name, PodUID: h.uid, Created: created}
			a = a.Next()
		}
		_, err := store.Create(ctx, b)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, ref := range refs {
		if ref.node == deadNode {
			rng := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(16 * ref.rail), 0, 0}), 12)
			base := rng.Addr().As4()
			cidr := netip.PrefixFrom(netip.AddrFrom4(base), bits) // node 0's block starts at the range's base
			deadBlocks = append(deadBlocks, ipam.BlockName(ipam.Pool{Network: fmt.Sprintf("gc-rail-%d", ref.rail), Prefix: rng}, cidr))
		}
	}
	// Count every allocation the store holds (the job's too).
	all, err := store.List(ctx, ipam.Pool{}, "")
	if err != nil {
		return nil, err
	}
	r.Blocks = len(all)
	for _, b := range all {
		r.Addresses += len(b.Spec.Allocations)
	}
	pr("controller: %d blocks hold %d addresses; starting %s", r.Blocks, r.Addresses, o.Bin)

	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "controller.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(o.Bin, "--kubeconfig="+kubeconfig, "--leader-elect=false", "--webhooks=false", "--metrics-addr=0", "--health-addr=0", "--log-level=info")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	if err := waitLog(ctx, logPath, "watching pods", 5*time.Minute); err != nil {
		return nil, err
	}
	r.SyncS = time.Since(start).Seconds()
	if err := sleep(ctx, o.Settle); err != nil {
		return nil, err
	}
	if r.RSS, r.PeakRSS, err = procMem(cmd.Process.Pid); err != nil {
		return nil, err
	}
	pr("controller: synced in %.1f s; RSS %.1f MiB (peak %.1f MiB)", r.SyncS, float64(r.RSS)/(1<<20), float64(r.PeakRSS)/(1<<20))

	// A node dies: its Node goes; its pods stay bound to it (nothing
	// deletes them here) and the controller releases their addresses after
	// the quarantine.
	r.GCReleased = len(byNode[deadNode]) * o.Rails
	t0 := time.Now()
	if err := admin.CoreV1().Nodes().Delete(ctx, nodes[deadNode], metav1.DeleteOptions{}); err != nil {
		return nil, err
	}
	deadline := t0.Add(nodeQuarantine + 3*time.Minute)
	for {
		left := 0
		for _, name := range deadBlocks {
			b, err := store.Get(ctx, name)
			if err != nil {
				return nil, err
			}
			left += len(b.Spec.Allocations)
		}
		if left == 0 {
			r.GCLatency = time.Since(t0)
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("controller: %d addresses of dead node %s still allocated after %s; log %s", left, nodes[deadNode], time.Since(t0).Round(time.Second), logPath)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	pr("controller: dead node's %d addresses released %.1f s after its Node was deleted (quarantine %s included)", r.GCReleased, r.GCLatency.Seconds(), nodeQuarantine)
	if _, peak, err := procMem(cmd.Process.Pid); err == nil {
		r.PeakRSS = peak
	}
	return r, nil
}

// bitsFor is the number of host bits a block needs for n addresses (and
// the network address, which the fixture leaves free), at least 4.
func bitsFor(n int) int {
	b := 4
	for 1<<b < n+2 {
		b++
	}
	return b
}

func waitLog(ctx context.Context, path, needle string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), needle) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%q not in %s after %s:\n%s", needle, path, limit, lastLines(string(b), 20))
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// procMem reads VmRSS and VmHWM of a process, in bytes.
func procMem(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return ParseProcStatus(bufio.NewScanner(f))
}

// ParseProcStatus reads VmRSS and VmHWM (kB) of a /proc/PID/status, in bytes.
func ParseProcStatus(sc *bufio.Scanner) (rss, hwm int64, err error) {
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "VmRSS" && k != "VmHWM" {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("/proc status %s: %q", k, v)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc status %s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc status: no VmRSS")
	}
	return rss, hwm, sc.Err()
}
