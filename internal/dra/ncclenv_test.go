package dra

// The NCCL environment of prepared claims (ncclenv.go) over the standard
// fixture node: NCCL_IB_HCA and NCCL_IB_GID_INDEX per device kind, the
// pod's own variables kept, several claims of one pod joined.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// fakePods is the API server's pods, as the plugin reads them.
type fakePods struct {
	mu    sync.Mutex
	pods  map[string]*corev1.Pod
	err   error
	reads int
}

func (f *fakePods) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	if p := f.pods[namespace+"/"+name]; p != nil {
		return p, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

func (f *fakePods) add(p *corev1.Pod) *corev1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pods == nil {
		f.pods = map[string]*corev1.Pod{}
	}
	f.pods[p.Namespace+"/"+p.Name] = p
	return p
}

// ctr is a container using claims (by ResourceClaim name) and setting env.
func ctr(name string, claims []string, env ...string) corev1.Container {
	c := corev1.Container{Name: name, Image: "trainer"}
	for _, cl := range claims {
		c.Resources.Claims = append(c.Resources.Claims, corev1.ResourceClaim{Name: "pc-" + cl})
	}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	return c
}

// podUsing is a pod of namespace training with containers; each claim a
// container uses is the pod's resourceClaims entry "pc-<claim>", the
// even-numbered ones naming the claim, the others generated from a
// template (pod.status.resourceClaimStatuses).
func podUsing(name string, containers ...corev1.Container) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "training", Name: name, UID: types.UID("pod-uid-" + name)},
		Spec: corev1.PodSpec{Containers: containers}}
	var seen []string
	for _, c := range containers {
		for _, rc := range c.Resources.Claims {
			if slices.Contains(seen, rc.Name) {
				continue
			}
			claim := strings.TrimPrefix(rc.Name, "pc-")
			if len(seen)%2 == 0 {
				p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: rc.Name, ResourceClaimName: &claim})
			} else {
				tmpl := "template"
				p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: rc.Name, ResourceClaimTemplateName: &tmpl})
				p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: rc.Name, ResourceClaimName: &claim})
			}
			seen = append(seen, rc.Name)
		}
	}
	return p
}

// reserve reserves claim c for the pods, as the scheduler does.
func reserve(c *resourceapi.ResourceClaim, pods ...*corev1.Pod) *resourceapi.ResourceClaim {
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

// ncclEnv is the NCCL part of a claim's CDI spec, sorted.
func ncclEnv(t *testing.T, dir, uid string) []string {
	t.Helper()
	var out []string
	for _, v := range specView(readSpec(t, dir, uid)).env {
		if strings.HasPrefix(v, "NCCL_") {
			out = append(out, v)
		}
	}
	return out
}

// portDir is the sysfs dir of an RDMA device's port 1 in the fixture.
func portDir(e *driverEnv, rdma string) string {
	return filepath.Join(e.s.Root, "class/infiniband", rdma, "ports/1")
}

// moveSharedIPv4GID puts the shared HCA's (mlx5_2) IPv4 GIDs at 4 and 5,
// after an IPv6 address's at 2 and 3, as on a host whose netdev got a
// global IPv6 address first.
func moveSharedIPv4GID(t *testing.T, e *driverEnv, d *Driver) {
	t.Helper()
	port := portDir(e, "mlx5_2")
	write := func(sub string, i int, v string) {
		if err := os.WriteFile(filepath.Join(port, sub, fmt.Sprint(i)), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v4, err := os.ReadFile(filepath.Join(port, "gids/3"))
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range []string{"fd00:0000:0000:0000:0000:0000:0000:0010", "fd00:0000:0000:0000:0000:0000:0000:0010", strings.TrimSpace(string(v4)), strings.TrimSpace(string(v4))} {
		write("gids", 2+i, g)
		write("gid_attrs/types", 2+i, []string{"IB/RoCE v1", "RoCE v2"}[i%2])
		write("gid_attrs/ndevs", 2+i, "ens8f0np0")
	}
	e.rescan(t, d)
}

// TestPrepareNCCLEnv: the NCCL variables a claim's CDI spec carries.
func TestPrepareNCCLEnv(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, e *driverEnv, d *Driver)
		devs  []alloc
		// pod: the pod the claim ("c") is reserved for; nil: none
		pod  *corev1.Pod
		want []string
		// wantReads: pods read from the API server
		wantReads int
	}{
		{name: "fresh RoCE VF: its HCA, exactly, and the index its first IPv4 address will get",
			devs: []alloc{{"nic", "vf-0000-41-00-2"}},
			want: []string{"NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_4"}},
		{name: "two VFs: both HCAs, sorted",
			devs: []alloc{{"nics", "vf-0000-41-00-3"}, {"nics", "vf-0000-41-00-2"}},
			want: []string{"NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_4,mlx5_5"}},
		{name: "VF whose port has a host IPv4 address now: the address goes with the move into the pod",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				port := portDir(e, "mlx5_4")
				for i, typ := range []string{"IB/RoCE v1", "RoCE v2"} {
					for sub, v := range map[string]string{"gids": "0000:0000:0000:0000:0000:ffff:0a00:0105", "gid_attrs/types": typ, "gid_attrs/ndevs": "enp65s0f0v0"} {
						if err := os.WriteFile(filepath.Join(port, sub, fmt.Sprint(2+i)), []byte(v+"\n"), 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}
				e.rescan(t, d)
			},
			devs: []alloc{{"nic", "vf-0000-41-00-2"}},
			want: []string{"NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_4"}},
		{name: "RoCE v2-only VF port: index 1",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				port := portDir(e, "mlx5_4")
				if err := os.Remove(filepath.Join(port, "gid_attrs/types/0")); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(port, "gids/0"), []byte("0000:0000:0000:0000:0000:0000:0000:0000\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				e.rescan(t, d)
			},
			devs: []alloc{{"nic", "vf-0000-41-00-2"}},
			want: []string{"NCCL_IB_GID_INDEX=1", "NCCL_IB_HCA==mlx5_4"}},
		{name: "VF whose GID table has no types: HCA only",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				if err := os.RemoveAll(filepath.Join(portDir(e, "mlx5_4"), "gid_attrs/types")); err != nil {
					t.Fatal(err)
				}
				e.rescan(t, d)
			},
			devs: []alloc{{"nic", "vf-0000-41-00-2"}},
			want: []string{"NCCL_IB_HCA==mlx5_4"}},
		{name: "shared HCA: the index of its IPv4 RoCE v2 GID now",
			setup: moveSharedIPv4GID,
			devs:  []alloc{{"rdma", "hca-0000-81-00-0"}},
			want:  []string{"NCCL_IB_GID_INDEX=5", "NCCL_IB_HCA==mlx5_2"}},
		{name: "shared HCA without an IPv4 address: HCA only",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				for _, i := range []string{"2", "3"} {
					if err := os.WriteFile(filepath.Join(portDir(e, "mlx5_2"), "gids", i), []byte("0000:0000:0000:0000:0000:0000:0000:0000\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				e.rescan(t, d)
			},
			devs: []alloc{{"rdma", "hca-0000-81-00-0"}},
			want: []string{"NCCL_IB_HCA==mlx5_2"}},
		{name: "InfiniBand VF: HCA, never a GID index",
			devs: []alloc{{"ib", "vf-0000-c1-00-2"}},
			want: []string{"NCCL_IB_HCA==mlx5_8"}},
		{name: "RoCE VF and InfiniBand VF: the RoCE device's index",
			devs: []alloc{{"nic", "vf-0000-41-00-2"}, {"ib", "vf-0000-c1-00-3"}},
			want: []string{"NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_4,mlx5_9"}},
		{name: "devices with different GID indexes: none (NCCL takes one)",
			setup: moveSharedIPv4GID,
			devs:  []alloc{{"nic", "vf-0000-41-00-2"}, {"rdma", "hca-0000-81-00-0"}},
			want:  []string{"NCCL_IB_HCA==mlx5_2,mlx5_4"}},
		{name: "pod sets NCCL_IB_HCA: kept, the GID index still given",
			devs:      []alloc{{"nic", "vf-0000-41-00-2"}},
			pod:       podUsing("trainer", ctr("main", []string{"c"}, "NCCL_IB_HCA=mlx5_4:1")),
			want:      []string{"NCCL_IB_GID_INDEX=3"},
			wantReads: 1},
		{name: "pod sets both in an init container using the claim: neither",
			devs: []alloc{{"nic", "vf-0000-41-00-2"}},
			pod: func() *corev1.Pod {
				p := podUsing("trainer", ctr("main", []string{"c"}))
				p.Spec.InitContainers = []corev1.Container{ctr("warmup", []string{"c"}, "NCCL_IB_HCA=x", "NCCL_IB_GID_INDEX=5")}
				return p
			}(),
			wantReads: 1},
		{name: "a container not using the claim sets them: given",
			devs:      []alloc{{"nic", "vf-0000-41-00-2"}},
			pod:       podUsing("trainer", ctr("main", []string{"c"}), ctr("sidecar", nil, "NCCL_IB_HCA=x", "NCCL_IB_GID_INDEX=5")),
			want:      []string{"NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_4"},
			wantReads: 1},
		{name: "extended-resource claim: the mapped container's env is kept",
			devs: []alloc{{"nic", "vf-0000-41-00-2"}},
			pod: func() *corev1.Pod {
				p := podUsing("trainer", ctr("main", nil, "NCCL_IB_GID_INDEX=7"))
				p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "c",
					RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: "example.com/sriov_rdma", RequestName: "container-0-request-0"}}}
				return p
			}(),
			want:      []string{"NCCL_IB_HCA==mlx5_4"},
			wantReads: 1},
		{name: "pod gone (deleted meanwhile): given",
			setup: func(t *testing.T, e *driverEnv, d *Driver) { e.pods.pods = nil },
			devs:  []alloc{{"nic", "vf-0000-41-00-2"}},
			pod:   podUsing("trainer", ctr("main", []string{"c"}, "NCCL_IB_HCA=x")),
			want:  []string{"NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_4"}, wantReads: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newDriverEnv(t)
			d := e.driver(t)
			c := newClaim("uid-c", "c", tc.devs...)
			if tc.pod != nil {
				reserve(c, e.pods.add(tc.pod))
			}
			if tc.setup != nil {
				tc.setup(t, e, d)
			}
			if r := prepare(t, d, c); r.Err != nil {
				t.Fatalf("Prepare: %v", r.Err)
			}
			if got := ncclEnv(t, e.cdi, "uid-c"); !slices.Equal(got, tc.want) {
				t.Errorf("NCCL env %q, want %q", got, tc.want)
			}
			if e.pods.reads != tc.wantReads {
				t.Errorf("%d pod reads, want %d", e.pods.reads, tc.wantReads)
			}
		})
	}
}

// TestPrepareNCCLEnvClaimsOfOnePod: claims prepared in one call for a
// pod name each other's HCAs when a container uses them together (each
// claim's spec the same value, so the order the runtime applies them in
// does not matter), and only then; the pod is read once; one of them
// failing fails the others it is used with.
func TestPrepareNCCLEnvClaimsOfOnePod(t *testing.T) {
	e := newDriverEnv(t)
	d := e.driver(t)
	pod := e.pods.add(podUsing("trainer", ctr("rank", []string{"rail-0", "rail-1"}), ctr("bench", []string{"rail-2"})))
	claims := []*resourceapi.ResourceClaim{
		reserve(newClaim("uid-0", "rail-0", alloc{"nic", "vf-0000-41-00-3"}), pod),
		reserve(newClaim("uid-1", "rail-1", alloc{"nic", "vf-0000-41-00-2"}), pod),
		reserve(newClaim("uid-2", "rail-2", alloc{"nic", "vf-0000-41-00-4"}), pod),
	}
	res, err := d.PrepareResourceClaims(context.Background(), claims)
	if err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[string][]string{
		"uid-0": {"NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_4,mlx5_5"},
		"uid-1": {"NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_4,mlx5_5"},
		"uid-2": {"NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_6"},
	} {
		if r := res[types.UID(uid)]; r.Err != nil {
			t.Fatalf("%s: %v", uid, r.Err)
		}
		if got := ncclEnv(t, e.cdi, uid); !slices.Equal(got, want) {
			t.Errorf("%s: NCCL env %q, want %q", uid, got, want)
		}
	}
	if e.pods.reads != 1 {
		t.Errorf("%d pod reads for one pod, want 1", e.pods.reads)
	}

	// a second pod: its rail-a cannot be prepared (the VF is not on the
	// node), so rail-b, used by the same container, is not either
	pod2 := e.pods.add(podUsing("trainer-2", ctr("rank", []string{"rail-a", "rail-b"})))
	bad := []*resourceapi.ResourceClaim{
		reserve(newClaim("uid-a", "rail-a", alloc{"nic", "vf-0000-41-00-9"}), pod2),
		reserve(newClaim("uid-b", "rail-b", alloc{"nic", "vf-0000-41-00-5"}), pod2),
	}
	res, err = d.PrepareResourceClaims(context.Background(), bad)
	if err != nil {
		t.Fatal(err)
	}
	if r := res["uid-b"]; r.Err == nil || !strings.Contains(r.Err.Error(), "claim training/rail-b: not prepared, since claim training/rail-a, used by the same container, was not") {
		t.Errorf("claim used with a failed one: %v", r.Err)
	}
	if _, err := os.Stat(cdiSpecPath(e.cdi, "uid-b")); err == nil || slices.Contains(d.Prepared(), "uid-b") || e.claimed.Holder("0000:41:00.5") != "" {
		t.Error("the claim used with a failed one left its spec, checkpoint entry or hold")
	}
}

// TestPrepareNCCLEnvOff: --dra-nccl-env=false gives no NCCL variable and
// reads no pod.
func TestPrepareNCCLEnvOff(t *testing.T) {
	e := newDriverEnv(t)
	d, err := NewDriver(DriverOptions{NodeName: testNode, CDIDir: e.cdi, StateDir: e.state, DevInfoDir: e.devInfo, Claimed: e.claimed, DevicePlugin: e.dp, Pods: e.pods})
	if err != nil {
		t.Fatal(err)
	}
	e.rescan(t, d)
	e.pods.err = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "trainer", fmt.Errorf("no rule"))
	c := reserve(newClaim("uid-c", "c", alloc{"nic", "vf-0000-41-00-2"}), podUsing("trainer", ctr("main", []string{"c"})))
	if r := prepare(t, d, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := ncclEnv(t, e.cdi, "uid-c"); len(got) != 0 || e.pods.reads != 0 {
		t.Errorf("NCCL env %q, %d pod reads; want none", got, e.pods.reads)
	}
}

// TestCheckpointOfOlderAgent: a checkpoint written before the NCCL
// environment (no env, link layer or GID index) loads, answers its claim
// with the spec it had, and a new claim of the same pod joined with it
// gets both HCAs but no GID index (the old device's is not known).
func TestCheckpointOfOlderAgent(t *testing.T) {
	e := newDriverEnv(t)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	old := `{"version":1,"claims":{"uid-old":{"namespace":"training","name":"old","devices":[{"requests":["nic"],"pool":"` + testNode + `",` +
		`"device":"vf-0000-41-00-2","cdiName":"uid-old-vf-0000-41-00-2","kind":"exclusive","resource":"example.com/sriov_rdma","pci":"0000:41:00.2",` +
		`"pf":"0000:41:00.0","rdma":"mlx5_4","charDevices":["/dev/infiniband/uverbs4"],"env":["PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA=0000:41:00.2"],"devInfo":true}]}}}`
	if err := os.WriteFile(filepath.Join(e.state, CheckpointFile), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	d := e.driver(t)
	pod := e.pods.add(podUsing("trainer", ctr("main", []string{"old", "new"})))
	if r := prepare(t, d, reserve(newClaim("uid-old", "old", alloc{"nic", "vf-0000-41-00-2"}), pod)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := specView(readSpec(t, e.cdi, "uid-old")).env; !slices.Equal(got, []string{"PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA=0000:41:00.2"}) {
		t.Errorf("old claim's env %q", got)
	}
	if r := prepare(t, d, reserve(newClaim("uid-new", "new", alloc{"nic", "vf-0000-41-00-3"}), pod)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := ncclEnv(t, e.cdi, "uid-new"); !slices.Equal(got, []string{"NCCL_IB_HCA==mlx5_4,mlx5_5"}) {
		t.Errorf("new claim's NCCL env %q", got)
	}
}
