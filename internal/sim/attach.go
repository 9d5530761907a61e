package sim

// The attach and detach rounds: the work dir the CNI side reads, kubelet admission, pod netns, CNI ADD and DEL in parallel.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
)

// attachRound creates the pods of every mode, has the kubelet stand-ins
// admit them (device allocation), creates their network namespaces and
// runs the meta CNI ADD for all of them in parallel.
func attachRound(ctx context.Context, o Options, l layout, m *Manifests, st *RunState, nodes map[string]*node, pr *progress, cycle int) ([]*podRun, CycleSummary, error) {
	var runs []*podRun
	var cs CycleSummary
	var errs []string
	for _, mode := range o.Modes {
		for i := 0; i < o.Pods; i++ {
			n := nodes[nodeFor(mode)]
			pod, err := m.Pod(mode, i, n.def.Name, randomID(8))
			if err != nil {
				return nil, cs, err
			}
			r := &podRun{mode: mode, node: n, pod: pod, rep: PodReport{Name: pod.Name, Namespace: pod.Namespace, Mode: mode, Node: n.def.Name,
				Devices: map[string][]string{}, DeviceNodes: []string{}, Interfaces: []Interface{}}}
			b, err := podYAML(pod)
			if err != nil {
				return nil, cs, err
			}
			if err := os.WriteFile(podManifestPath(l, pod.Namespace, pod.Name), b, 0o644); err != nil {
				return nil, cs, err
			}
			runs = append(runs, r)
		}
	}
	// kubelet admits pods one by one: GetPreferredAllocation + Allocate
	ignored := map[string]bool{}
	for _, r := range runs {
		t0 := time.Now()
		a, err := r.node.kubelet.admit(ctx, r.pod)
		r.rep.AllocMS = time.Since(t0).Milliseconds()
		if err != nil {
			r.rep.Error = err.Error()
			errs = append(errs, err.Error())
			continue
		}
		r.alloc = a
		for res, ids := range a.Devices {
			r.rep.Devices[res] = ids
			for _, d := range a.Responses[res].Devices {
				r.rep.DeviceNodes = append(r.rep.DeviceNodes, d.HostPath)
			}
		}
		for _, ig := range a.Ignored {
			ignored[ig] = true
		}
	}
	if len(ignored) > 0 && cycle == 1 {
		pr.printf("not simulated, ignored by the kubelet stand-in: %s (no device plugin for it on the simulated nodes)", strings.Join(slices.Sorted(maps.Keys(ignored)), ", "))
	}
	pr.printf("round %d: kubelet stand-ins admitted %d pods (GetPreferredAllocation + Allocate through the agent's device plugin servers)", cycle, len(runs))
	// sandboxes
	for _, r := range runs {
		kp := keptPod{Namespace: r.pod.Namespace, Name: r.pod.Name, Node: r.node.def.Name, Mode: r.mode, UID: string(r.pod.UID)}
		if r.mode != ModeHost && r.alloc != nil {
			kp.ContainerID = randomID(32)
			kp.Netns = l.podNS(r.pod.Name)
			netns, err := newNamedNS(kp.Netns)
			if err != nil {
				r.rep.Error = err.Error()
				errs = append(errs, err.Error())
				continue
			}
			r.netns = netns
			r.rep.Netns, r.rep.ContainerID = kp.Netns, kp.ContainerID
		} else {
			r.rep.Netns = l.hostNS(r.node.def.Name) + " (hostNetwork)"
		}
		st.Pods = append(st.Pods, kp)
	}
	if err := writeState(st); err != nil {
		return runs, cs, err
	}
	for _, n := range nodes {
		if n.ib != nil {
			if err := n.markLog(); err != nil {
				return runs, cs, err
			}
		}
	}
	t0 := time.Now()
	var mu sync.Mutex
	inParallel(runs, func(r *podRun) {
		start := time.Now()
		err := r.node.host.Do(func(ns.NetNS) error {
			_, err := r.node.cni.AddNetworkList(ctx, r.node.meta, r.runtimeConf())
			return err
		})
		r.rep.AttachMS = time.Since(start).Milliseconds()
		if err != nil {
			mu.Lock()
			r.rep.Error = fmt.Sprintf("CNI ADD of pod %s/%s on %s: %v (meta CNI log: %s)", r.pod.Namespace, r.pod.Name, r.node.def.Name, err, filepath.Join(r.node.dir, "rdmanet.log"))
			errs = append(errs, r.rep.Error)
			mu.Unlock()
		}
	})
	cs.AttachWallMS = time.Since(t0).Milliseconds()
	attached := 0
	for _, r := range runs {
		if r.rep.Error == "" {
			if err := describe(r, l, m); err != nil {
				r.rep.Error = err.Error()
				errs = append(errs, err.Error())
				continue
			}
			attached++
		}
	}
	pr.printf("round %d: %d/%d pods attached, CNI ADDs in parallel in %dms", cycle, attached, len(runs), cs.AttachWallMS)
	if len(errs) > 0 {
		return runs, cs, fmt.Errorf("round %d: %s", cycle, strings.Join(errs, "; "))
	}
	return runs, cs, nil
}

// inParallel runs fn for every pod that has a network namespace, all at
// once (as kubelet starts or stops a round's sandboxes), and waits.
func inParallel(runs []*podRun, fn func(*podRun)) {
	var wg sync.WaitGroup
	for _, r := range runs {
		if r.netns == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(r)
		}()
	}
	wg.Wait()
}

// runtimeConf is the CNI runtime config of the pod's sandbox.
func (r *podRun) runtimeConf() *libcni.RuntimeConf {
	return runtimeConf(r.rep.ContainerID, r.netns.Path(), r.pod.Namespace, r.pod.Name, string(r.pod.UID))
}

func podManifestPath(l layout, namespace, name string) string {
	return filepath.Join(l.manifests(), "pod-"+namespace+"-"+name+".yaml")
}

// prepare lays out the work dir the CNI side reads: the bin dir with links
// to bins (and rdmanet-ipam as "whereabouts", the name the seed NAD uses),
// the static source's manifests (the NADs, RoCE and InfiniBand) and its
// network-status dir.
func (l layout) prepare(m *Manifests, bins []string) error {
	for _, d := range []string{l.cniBin(), l.manifests(), l.statusDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, b := range bins {
		if err := os.Symlink(filepath.Join(l.BinDir, b), filepath.Join(l.cniBin(), b)); err != nil {
			return err
		}
	}
	if err := os.Symlink(filepath.Join(l.BinDir, "rdmanet-ipam"), filepath.Join(l.cniBin(), "whereabouts")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(l.manifests(), "nads.yaml"), m.NADs, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(l.manifests(), "ib-nads.yaml"), m.IBNADs, 0o644)
}

func runtimeConf(containerID, netns, namespace, name, uid string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: containerID, NetNS: netns, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", namespace}, {"K8S_POD_NAME", name},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID}, {"K8S_POD_UID", uid}}}
}

// detachRound runs CNI DEL for every pod in parallel, deletes the pod
// namespaces as the runtime does, and deletes the pods (kubelet releases
// their devices; their manifests and network-status go away).
func detachRound(ctx context.Context, l layout, st *RunState, runs []*podRun, pr *progress) int64 {
	t0 := time.Now()
	inParallel(runs, func(r *podRun) {
		start := time.Now()
		err := r.node.host.Do(func(ns.NetNS) error {
			return r.node.cni.DelNetworkList(ctx, r.node.meta, r.runtimeConf())
		})
		r.rep.DetachMS = time.Since(start).Milliseconds()
		if err != nil {
			pr.printf("CNI DEL of pod %s/%s failed: %v", r.pod.Namespace, r.pod.Name, err)
		}
		r.netns.Close()
		if err := deleteNamedNS(l.podNS(r.pod.Name)); err != nil {
			pr.printf("%v", err)
		}
	})
	for _, r := range runs {
		r.node.kubelet.release(r.pod.Namespace, r.pod.Name)
		_ = os.Remove(podManifestPath(l, r.pod.Namespace, r.pod.Name))
		_ = os.Remove(filepath.Join(l.statusDir(), r.pod.Namespace+"_"+r.pod.Name+".json"))
	}
	st.Pods = nil
	_ = writeState(st)
	return time.Since(t0).Milliseconds()
}
