package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/netops"
)

// soak pacing: how the soak's "kubelet and runtime" retry, as the real ones do.
const (
	soakAdmitFor    = 15 * time.Second // kubelet retries admission while pools re-register
	soakAddAttempts = 5                // sandbox attempts per pod
	soakDelFor      = 60 * time.Second // the runtime retries DEL (a pod terminating) this long
	soakCallTimeout = 90 * time.Second
)

// attach admits the pod and creates its sandbox, retrying as kubelet and
// the runtime do: a failed ADD is torn down (DEL) and the pod gets a new
// sandbox, up to soakAddAttempts.
func (s *soak) attach(ctx context.Context, fault string, p *soakPod) {
	key := p.pod.Namespace + "/" + p.pod.Name
	for deadline := time.Now().Add(soakAdmitFor); ; time.Sleep(50 * time.Millisecond) {
		a, err := p.n.kubelet.admit(ctx, p.pod)
		if err == nil {
			p.alloc = a
			break
		}
		if fault == FaultStorm && strings.Contains(err.Error(), "insufficient") {
			p.unsched = true
			s.count(func(r *SoakReport) { r.Unschedulable++ })
			return
		}
		if time.Now().After(deadline) {
			s.count(func(r *SoakReport) { r.FailedAdds++ })
			s.problem(fault, "pod %s never admitted: %v", key, err)
			return
		}
	}
	if p.mode == ModeHost {
		p.ok = true // hostNetwork: no CNI runs
		return
	}
	b, err := podYAML(p.pod)
	if err == nil {
		err = writeManifest(podManifestPath(s.l, p.pod.Namespace, p.pod.Name), b)
	}
	if err != nil {
		// the "API server" could not take the pod (state-full): it never starts
		p.n.kubelet.release(p.pod.Namespace, p.pod.Name)
		p.alloc = nil
		s.count(func(r *SoakReport) { r.Unschedulable++ })
		return
	}
	var lastErr error
	for attempt := 1; attempt <= soakAddAttempts; attempt++ {
		if attempt > 1 {
			time.Sleep(time.Duration(attempt) * 250 * time.Millisecond)
		}
		p.cid = randomID(32)
		p.nsName = s.l.podNS(fmt.Sprintf("%s-%d", p.pod.Name, attempt))
		p.nsGone = false
		if p.netns, err = newNamedNS(p.nsName); err != nil {
			lastErr = err
			continue
		}
		list := s.daemon[p.n.def.Name]
		cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
		if attempt == 1 {
			if p.fp != "" {
				// the per-call path: the shim runs rdmanet-direct, whose
				// delegates read the failpoint (a daemon takes its env from
				// its own process, not the call)
				list = s.direct[p.n.def.Name]
				cctx = withCallEnv(cctx, netops.EnvFault+"="+p.fp)
			}
			if p.faults[FaultAddCancelled] {
				// the runtime's timeout: it kills the shim and DELs at once
				go func(d time.Duration) { time.Sleep(d); cancel() }(s.randDur(s.estAdd / 2))
			}
			if p.faults[FaultPodDeleted] {
				go func(d time.Duration) {
					time.Sleep(d)
					s.deletePod(p)
				}(s.randDur(s.estAdd / 2))
			}
		}
		err := s.add(cctx, p, list)
		cancelled := cctx.Err() != nil
		cancel()
		if err == nil && !cancelled && !p.deleted {
			p.ok = true
			return
		}
		if err != nil {
			lastErr = err
			s.count(func(r *SoakReport) { r.PerFault[fault].FailedADDs++ })
		}
		// the runtime tears the failed (or abandoned) sandbox down
		s.teardown(ctx, fault, p)
		if p.deleted {
			return // the pod is gone: no more sandboxes
		}
	}
	s.count(func(r *SoakReport) { r.FailedAdds++ })
	s.problem(fault, "pod %s (%s) never attached in %d sandboxes; last error: %v", key, p.mode, soakAddAttempts, lastErr)
	p.n.kubelet.release(p.pod.Namespace, p.pod.Name)
	s.removePodFiles(p)
}

func writeManifest(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

func (s *soak) rt(p *soakPod) *libcni.RuntimeConf {
	return runtimeConf(p.cid, NetnsPath(p.nsName), p.pod.Namespace, p.pod.Name, string(p.pod.UID))
}

func (s *soak) add(ctx context.Context, p *soakPod, list *libcni.NetworkConfigList) error {
	s.count(func(r *SoakReport) { r.Adds++ })
	return p.n.host.Do(func(ns.NetNS) error {
		_, err := p.n.cni.AddNetworkList(ctx, list, s.rt(p))
		return err
	})
}

func (s *soak) del(ctx context.Context, p *soakPod) error {
	s.count(func(r *SoakReport) { r.Dels++ })
	ctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	defer cancel()
	return p.n.host.Do(func(ns.NetNS) error {
		return p.n.cni.DelNetworkList(ctx, s.daemon[p.n.def.Name], s.rt(p))
	})
}

// teardown DELs the pod's current sandbox until DEL succeeds (the runtime
// retries a pod stuck terminating) and destroys its netns. A DEL may
// succeed with delegates left pending (the daemon retries them): the VF is
// then still in the pod's netns, and returns to the host when the netns
// is destroyed, as a physical netdev does.
func (s *soak) teardown(ctx context.Context, fault string, p *soakPod) {
	ctx = context.WithoutCancel(ctx) // an interrupted soak still detaches what it attached
	var err error
	for deadline := time.Now().Add(soakDelFor); ; {
		if err = s.del(ctx, p); err == nil {
			break
		}
		s.count(func(r *SoakReport) { r.PerFault[fault].Retries++ })
		if time.Now().After(deadline) {
			s.count(func(r *SoakReport) { r.FailedDels++ })
			s.problem(fault, "pod %s/%s container %s: DEL never succeeded in %s: %v", p.pod.Namespace, p.pod.Name, p.cid[:12], soakDelFor, err)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if p.netns != nil {
		if err := s.destroyNetns(p); err != nil {
			s.problem(fault, "destroy netns %s: %v", p.nsName, err)
		}
	}
	if err := deleteNamedNS(p.nsName); err != nil {
		s.problem(fault, "%v", err)
	}
}

// detach is the pod's deletion: DEL (after the faults of the round), then
// the sandbox, the pod's devices and its object go.
func (s *soak) detach(ctx context.Context, fault string, p *soakPod) {
	if p.alloc == nil {
		return
	}
	if p.ok && p.mode != ModeHost {
		if p.faults[FaultNetnsGone] {
			if err := s.destroyNetns(p); err != nil {
				s.problem(fault, "destroy netns of %s: %v", p.pod.Name, err)
			}
		}
		s.teardown(ctx, fault, p)
		if p.faults[FaultDelTwice] {
			if err := s.del(ctx, p); err != nil {
				s.count(func(r *SoakReport) { r.FailedDels++ })
				s.problem(fault, "second DEL of pod %s/%s: %v", p.pod.Namespace, p.pod.Name, err)
			}
		}
	}
	p.n.kubelet.release(p.pod.Namespace, p.pod.Name)
	s.removePodFiles(p)
}

// deletePod deletes the pod object (its manifest) while its ADD may run.
func (s *soak) deletePod(p *soakPod) {
	p.deleted = true
	_ = os.Remove(podManifestPath(s.l, p.pod.Namespace, p.pod.Name))
}

func (s *soak) removePodFiles(p *soakPod) {
	_ = os.Remove(podManifestPath(s.l, p.pod.Namespace, p.pod.Name))
	_ = os.Remove(filepath.Join(s.l.statusDir(), p.pod.Namespace+"_"+p.pod.Name+".json"))
}

// destroyNetns destroys the pod's network namespace (before its DEL, as a
// runtime that lost the sandbox does, or after) and plays the kernel's part: a
// physical netdev (here the veth end that stands in for a VF; the pod's
// eth0 veth and macvlan are virtual and die with the namespace) moves to
// the node's host namespace under its name, or "dev<ifindex>" when the
// host has that name already. RDMA devices follow by themselves (the
// recorder sees the namespace gone).
func (s *soak) destroyNetns(p *soakPod) error {
	var moved []netops.Link
	err := p.netns.Do(func(ns.NetNS) error {
		ls, err := netops.Links()
		if err != nil {
			return err
		}
		for _, l := range ls {
			if l.Kind == "veth" && l.Name != "eth0" {
				moved = append(moved, l)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// the kernel moves and names them under one lock (rtnl): so does the soak
	s.kernel.Lock()
	defer s.kernel.Unlock()
	for _, l := range moved {
		name := l.Name
		taken := p.n.host.Do(func(ns.NetNS) error {
			_, err := netops.LinkByName(name)
			return err
		}) == nil
		err := p.netns.Do(func(ns.NetNS) error {
			if taken {
				name = fmt.Sprintf("dev%d", l.Index)
				if err := netops.RenameLink(l.Name, name); err != nil {
					return err
				}
			}
			return netops.SetLinkNetns(name, p.n.host)
		})
		if err != nil {
			return fmt.Errorf("return %s to the host: %w", l.Name, err)
		}
	}
	p.netns.Close()
	p.netns = nil
	p.nsGone = true
	if err := deleteNamedNS(p.nsName); err != nil {
		return err
	}
	if _, err := os.Stat(NetnsPath(p.nsName)); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns %s still mounted", p.nsName)
	}
	return nil
}
