package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// vfByMAC maps the MAC each simulated VF netdev is created with to its index.
func vfByMAC(vfs int) map[string]int {
	out := map[string]int{}
	for i := 0; i < vfs; i++ {
		out[vfMAC(i).String()] = i
	}
	return out
}

// checkAttached checks the live pods after an attach phase: every address
// (eth0 and net1) in one pod only, every VF allocated to one pod only, and
// each exclusive pod's net1 the very VF kubelet allocated to it.
func (s *soak) checkAttached(fault string, pods []*soakPod) {
	ipOwner := map[string]string{}
	vfOwner := map[string]string{}
	macs := vfByMAC(s.o.VFs)
	for _, p := range pods {
		if !p.ok || p.alloc == nil {
			continue
		}
		key := p.pod.Namespace + "/" + p.pod.Name
		for _, vf := range p.alloc.Devices[ExclusiveResource] {
			if other, dup := vfOwner[vf]; dup {
				s.count(func(r *SoakReport) { r.DuplicateVFs++ })
				s.problem(fault, "VF %s allocated to %s and %s", vf, other, key)
			}
			vfOwner[vf] = key
		}
		if p.mode == ModeHost {
			continue
		}
		var net1 *netops.Link
		var addrs []string
		err := p.netns.Do(func(ns.NetNS) error {
			ls, err := netops.Links()
			if err != nil {
				return err
			}
			for _, l := range ls {
				if l.Name != "eth0" && l.Name != "net1" {
					continue
				}
				if l.Name == "net1" {
					net1 = &l
				}
				as, err := netops.Addrs(l.Name)
				if err != nil {
					return err
				}
				for _, a := range as {
					if a.IP.To4() != nil {
						addrs = append(addrs, a.IP.String())
					}
				}
			}
			return nil
		})
		if err != nil {
			s.problem(fault, "read pod %s netns: %v", key, err)
			continue
		}
		if net1 == nil {
			s.problem(fault, "pod %s attached without net1", key)
			continue
		}
		for _, ip := range addrs {
			if other, dup := ipOwner[ip]; dup {
				s.count(func(r *SoakReport) { r.DuplicateIPs++ })
				s.problem(fault, "address %s in pods %s and %s", ip, other, key)
			}
			ipOwner[ip] = key
		}
		if p.mode == ModeExclusive {
			want := p.alloc.Devices[ExclusiveResource]
			i, isVF := macs[net1.MAC.String()]
			got := ""
			if isVF {
				got = vfBDF(p.n.fix, i)
			}
			if len(want) != 1 || got != want[0] {
				s.count(func(r *SoakReport) { r.WrongVFs++ })
				s.problem(fault, "pod %s: net1 (MAC %s) is VF %q, kubelet allocated %v", key, net1.MAC, got, want)
			}
		}
	}
}

// vfBDF is the PCI address of VF i of the exclusive PF.
func vfBDF(fix *sysfsfixture.Node, i int) string {
	for bdf, netdev := range fix.NetByBDF {
		if netdev == VFNetdev(i) {
			return bdf
		}
	}
	return ""
}

// checkQuiescent checks the hosts once a round's pods are gone: every VF
// back in the host, no address held in the IPAM store (else GC must
// release it; the time it takes is measured), and nothing else different
// from the last check. Differences are counted once: the next round is
// compared with what this one left.
func (s *soak) checkQuiescent(ctx context.Context, fault string) error {
	for name, n := range s.nodes {
		t0 := time.Now()
		left, err := s.waitPending(ctx, n)
		if err != nil {
			return err
		}
		d := time.Since(t0).Seconds()
		s.count(func(r *SoakReport) { r.DelConvergeS = max(r.DelConvergeS, d) })
		if len(left) > 0 {
			s.problem(fault, "node %s: DEL state of gone containers still there after %s: %s", name, soakPendingFor, strings.Join(left, ", "))
		}
	}
	now, err := s.snapshot()
	if err != nil {
		return err
	}
	for name, n := range s.nodes {
		st := now.Nodes[name]
		home := map[string]bool{}
		for _, l := range st.Links {
			home[l.Name] = true
		}
		for i := 0; i < n.def.VFs; i++ {
			if !home[VFNetdev(i)] {
				s.count(func(r *SoakReport) { r.StrandedVFs++ })
				s.problem(fault, "node %s: VF %d (%s) is not in the host, and no pod lives", name, i, VFNetdev(i))
			}
		}
		held, err := s.ipamHeld(n)
		if err != nil {
			return err
		}
		if held > 0 {
			t0 := time.Now()
			released, left, err := s.collect(ctx, n)
			if err != nil {
				return err
			}
			d := time.Since(t0).Seconds()
			s.count(func(r *SoakReport) {
				r.GCReleased += released
				r.LeakedIPs += left
				r.GCConvergeS = max(r.GCConvergeS, d)
			})
			s.pr.printf("round %d (%s): node %s: %d addresses held for deleted pods; GC released %d in %.2fs, %d left", s.rep.Rounds, fault, name, held, released, d, left)
			if left > 0 {
				s.problem(fault, "node %s: %d addresses still held for deleted pods after GC", name, left)
			}
		}
	}
	if now, err = s.snapshot(); err != nil {
		return err
	}
	for _, d := range s.base.Diff(now) {
		if strings.Contains(d, "ipam/") {
			continue // counted as addresses above
		}
		s.problem(fault, "host changed: %s", d)
	}
	s.base = now
	return nil
}

// soakPendingFor bounds the wait for pending DELs (the daemon retries them
// with a backoff of 1s, 2s, 4s, ... after a scan every 5s).
const soakPendingFor = 2 * time.Minute

// waitPending waits until no state of a container is left on the node: the
// meta plugin's cache records (a DEL whose delegates are still pending is
// kept there and retried by the daemon) and the sriov and rdma records. It
// returns what is left after soakPendingFor.
func (s *soak) waitPending(ctx context.Context, n *node) ([]string, error) {
	deadline := time.Now().Add(soakPendingFor)
	for {
		var left []string
		for _, dir := range []string{filepath.Join(n.dir, "rdmanet", "cache"), filepath.Join(n.dir, "cni-state")} {
			err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json") {
					return err
				}
				rel, _ := filepath.Rel(n.dir, p)
				left = append(left, rel)
				return nil
			})
			if err != nil && !os.IsNotExist(err) {
				return nil, err
			}
		}
		if len(left) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return left, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ipamHeld counts the pod addresses in the node's IPAM store.
func (s *soak) ipamHeld(n *node) (int, error) {
	held := 0
	err := filepath.WalkDir(filepath.Join(n.dir, "ipam"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var v any
		if json.Unmarshal(b, &v) == nil {
			held += countAllocations(v)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return 0, fmt.Errorf("node %s IPAM store: %w", n.def.Name, err)
	}
	return held, nil
}

// noPods is GC's view of the cluster between rounds: no pod lives.
type noPods struct{ nodes []string }

func (c noPods) Pods(context.Context) (map[string]gc.Pod, error) { return map[string]gc.Pod{}, nil }
func (c noPods) Nodes(context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	for _, n := range c.nodes {
		out[n] = true
	}
	return out, nil
}

// collect runs IPAM GC on the node's store until nothing is held (at most
// 5 passes) and returns how many it released and how many are left.
func (s *soak) collect(ctx context.Context, n *node) (released, left int, err error) {
	var names []string
	for name := range s.nodes {
		names = append(names, name)
	}
	store := &ipam.LocalStore{Dir: filepath.Join(n.dir, "ipam")}
	for pass := 0; pass < 5; pass++ {
		rep, err := gc.Run(ctx, gc.Options{Store: store, Cluster: noPods{nodes: names}, Grace: gc.NoGrace})
		if err != nil {
			return released, 0, fmt.Errorf("node %s: IPAM GC: %w", n.def.Name, err)
		}
		released += len(rep.Released)
		if left, err = s.ipamHeld(n); err != nil || left == 0 {
			return released, left, err
		}
	}
	return released, left, nil
}
