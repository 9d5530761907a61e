// Package ipamload drives an IPAM CNI plugin binary the way a runtime or a
// meta plugin does — one exec per call, CNI_* environment and the network
// config on stdin — with many calls at once over several node identities,
// and reports latencies, the addresses handed out and the failures. The
// cross-node test (test/e2e) and `make bench-ipam-compare` use it, for
// rdmanet-ipam (per call or through rdmanet-daemon) and for Whereabouts.
package ipamload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Node is one node identity: the environment its calls add (NODENAME, the
// daemon socket of that node, its state directory, ...).
type Node struct {
	Name string
	Env  []string
}

// Load is one plugin under load.
type Load struct {
	// Bin is the plugin binary; Config its network config (stdin).
	Bin    string
	Config []byte
	// Nodes: call i runs as node i % len(Nodes).
	Nodes []Node
	// Netns is CNI_NETNS of every call (an IPAM plugin does not enter it);
	// CNIPath is CNI_PATH.
	Netns, CNIPath string
	// Prefix makes the container IDs (<Prefix>-<i>) and pod names unique
	// per load.
	Prefix string
}

// Run is the outcome of one phase (all ADDs or all DELs).
type Run struct {
	Lat  []time.Duration // per call
	Addr []netip.Addr    // ADD: the first address of call i's result
	Errs []error
	Wall time.Duration
	// CPU is the user+system time of the plugin processes (call i's).
	CPU []time.Duration
}

// ContainerID of call i.
func (l *Load) ContainerID(i int) string { return fmt.Sprintf("%s-%06d", l.Prefix, i) }

// Do runs n calls of cmd (ADD or DEL), conc at a time, calls 0..n-1.
func (l *Load) Do(ctx context.Context, cmd string, n, conc int) Run {
	r := Run{Lat: make([]time.Duration, n), Addr: make([]netip.Addr, n), Errs: make([]error, n), CPU: make([]time.Duration, n)}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				r.Addr[i], r.CPU[i], r.Errs[i] = l.call(ctx, cmd, i)
				r.Lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	r.Wall = time.Since(start)
	return r
}

func (l *Load) call(ctx context.Context, cmd string, i int) (addr netip.Addr, cpu time.Duration, err error) {
	addr, c, err := l.exec(ctx, cmd, i)
	if c != nil && c.ProcessState != nil {
		cpu = c.ProcessState.UserTime() + c.ProcessState.SystemTime() // of the plugin and what it waited for
	}
	return addr, cpu, err
}

func (l *Load) exec(ctx context.Context, cmd string, i int) (netip.Addr, *exec.Cmd, error) {
	node := l.Nodes[i%len(l.Nodes)]
	c := exec.CommandContext(ctx, l.Bin)
	c.Stdin = bytes.NewReader(l.Config)
	c.Env = append(os.Environ(),
		"CNI_COMMAND="+cmd, "CNI_CONTAINERID="+l.ContainerID(i), "CNI_NETNS="+l.Netns, "CNI_IFNAME=net1", "CNI_PATH="+l.CNIPath,
		fmt.Sprintf("CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=%s-p%06d;K8S_POD_UID=uid-%s-%06d;K8S_POD_INFRA_CONTAINER_ID=%s", l.Prefix, i, l.Prefix, i, l.ContainerID(i)))
	c.Env = append(c.Env, node.Env...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return netip.Addr{}, c, fmt.Errorf("%s %s (node %s): %w: %s %s", cmd, l.ContainerID(i), node.Name, err,
			strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()))
	}
	if cmd != "ADD" {
		return netip.Addr{}, c, nil
	}
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || len(res.IPs) == 0 {
		return netip.Addr{}, c, fmt.Errorf("ADD %s: result %q has no address (%v)", l.ContainerID(i), stdout.String(), err)
	}
	p, err := netip.ParsePrefix(res.IPs[0].Address)
	if err != nil {
		return netip.Addr{}, c, fmt.Errorf("ADD %s: address %q: %w", l.ContainerID(i), res.IPs[0].Address, err)
	}
	return p.Addr(), c, nil
}

// Failed counts the failed calls and returns the first error.
func (r Run) Failed() (int, error) {
	n := 0
	var first error
	for _, e := range r.Errs {
		if e != nil {
			if n == 0 {
				first = e
			}
			n++
		}
	}
	return n, first
}

// Duplicates counts the successful ADDs whose address another successful
// ADD also got.
func (r Run) Duplicates() int {
	seen := map[netip.Addr]int{}
	for i, a := range r.Addr {
		if r.Errs[i] == nil && a.IsValid() {
			seen[a]++
		}
	}
	d := 0
	for _, c := range seen {
		d += c - 1
	}
	return d
}

// CPUTotal sums the plugin processes' CPU time.
func (r Run) CPUTotal() time.Duration {
	var t time.Duration
	for _, c := range r.CPU {
		t += c
	}
	return t
}

// Pct is the p-th percentile (0..100) of the latencies.
func (r Run) Pct(p float64) time.Duration {
	if len(r.Lat) == 0 {
		return 0
	}
	s := slices.Clone(r.Lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(p/100*float64(len(s))))]
}
