package dra

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPrepareJoinsRequestsOfOnePool: a claim with two requests of the
// seed's pool gives a container that uses it whole one PCIDEVICE_ value
// with both VFs (as the device plugin's Allocate would), and keeps one value
// per request when a container uses a single request, the claim serves an
// extended resource, or its pod cannot be read.
func TestPrepareJoinsRequestsOfOnePool(t *testing.T) {
	const v = "PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA="
	joined := []string{v + "0000:41:00.2,0000:41:00.3"}
	perRequest := []string{v + "0000:41:00.2", v + "0000:41:00.3"}
	byRequest := func(req string) corev1.Container {
		c := ctr("rank-"+req, nil)
		c.Resources.Claims = []corev1.ResourceClaim{{Name: "pc-c", Request: req}}
		return c
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		// podErr: the pod cannot be read (with the NCCL environment off,
		// which would refuse the claim then)
		podErr bool
		want   []string
	}{
		{name: "one container uses the claim whole: one joined value", pod: podUsing("trainer", ctr("main", []string{"c"})), want: joined},
		{name: "two containers, both whole", pod: podUsing("trainer", ctr("a", []string{"c"}), ctr("b", []string{"c"})), want: joined},
		{name: "each container its own request: one value per request", want: perRequest,
			pod: func() *corev1.Pod {
				p := podUsing("trainer", ctr("main", []string{"c"}))
				p.Spec.Containers = []corev1.Container{byRequest("nic-0"), byRequest("nic-1")}
				return p
			}()},
		{name: "extended-resource claim: one request per container", want: perRequest,
			pod: func() *corev1.Pod {
				p := podUsing("trainer", ctr("main", nil))
				p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "c"}
				return p
			}()},
		{name: "pod unreadable: per request", pod: podUsing("trainer", ctr("main", []string{"c"})), podErr: true, want: perRequest},
		{name: "reserved for no pod: per request", want: perRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newDriverEnv(t)
			d := e.driver(t)
			d.o.NCCLEnv = false
			c := newClaim("uid-c", "c", alloc{"nic-0", "vf-0000-41-00-2"}, alloc{"nic-1", "vf-0000-41-00-3"})
			if tc.pod != nil {
				reserve(c, e.pods.add(tc.pod))
			}
			if tc.podErr {
				e.pods.err = errors.New("the API server is down")
			}
			if r := prepare(t, d, c); r.Err != nil {
				t.Fatalf("Prepare: %v", r.Err)
			}
			var got []string
			for _, env := range specView(readSpec(t, e.cdi, "uid-c")).env {
				if strings.HasPrefix(env, v) {
					got = append(got, env)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("PCIDEVICE_ env %q, want %q", got, tc.want)
			}
		})
	}
}
