package controller

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestPoolLabel(t *testing.T) {
	long := "example.com/" + strings.Repeat("n", 60)
	tests := []struct {
		name     string
		resource string
		want     string
		readable bool // PoolResource gives the resource back
	}{
		{name: "sriov pool", resource: "example.com/sriov_rdma", want: "rdmanet.io/pool.example.com_sriov_rdma", readable: true},
		{name: "shared pool, default prefix", resource: "rdma/hca_shared_devices_a", want: "rdmanet.io/pool.rdma_hca_shared_devices_a", readable: true},
		{name: "upper case and dots in the name", resource: "intel.com/Mlx.Pool-1", want: "rdmanet.io/pool.intel.com_Mlx.Pool-1", readable: true},
		{name: "too long: hashed", resource: long, want: "rdmanet.io/pool.h-"},
		{name: "name ending in '_': hashed", resource: "example.com/pool_", want: "rdmanet.io/pool.h-"},
		{name: "prefix that looks like a hash: hashed", resource: "h-0/x", want: "rdmanet.io/pool.h-"},
	}
	seen := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PoolLabel(tc.resource)
			if errs := validation.IsQualifiedName(got); len(errs) > 0 {
				t.Fatalf("PoolLabel(%q) = %q, not a valid label key: %v", tc.resource, got, errs)
			}
			if tc.readable && got != tc.want || !tc.readable && (!strings.HasPrefix(got, tc.want) || len(got) != len(tc.want)+20) {
				t.Errorf("PoolLabel(%q) = %q, want %q", tc.resource, got, tc.want)
			}
			if prev, dup := seen[got]; dup {
				t.Errorf("PoolLabel(%q) = PoolLabel(%q) = %q", tc.resource, prev, got)
			}
			seen[got] = tc.resource
			back, ok := PoolResource(got)
			if ok != tc.readable || tc.readable && back != tc.resource {
				t.Errorf("PoolResource(%q) = %q, %t; want %q, %t", got, back, ok, tc.resource, tc.readable)
			}
			if PoolLabel(tc.resource) != got {
				t.Errorf("PoolLabel(%q) is not deterministic", tc.resource)
			}
		})
	}
	if _, ok := PoolResource("rdmanet.io/rdma-netns-mode"); ok {
		t.Error("PoolResource read a non-pool key")
	}
}

func qty(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }

func TestLabelChanges(t *testing.T) {
	const (
		sriov  = "example.com/sriov_rdma"
		shared = "rdma/hca_shared_devices_a"
	)
	lSriov, lShared := PoolLabel(sriov), PoolLabel(shared)
	str := func(s string) *string { return &s }
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		capacity    corev1.ResourceList
		pools       []string
		poolsKnown  bool
		want        map[string]*string
	}{
		{
			name:       "served pools labelled, unserved and unconfigured not",
			capacity:   corev1.ResourceList{sriov: qty(8), shared: qty(0), "other.com/x": qty(4), corev1.ResourceCPU: qty(16)},
			pools:      []string{sriov, shared, "missing.com/y"},
			poolsKnown: true,
			want:       map[string]*string{lSriov: str("true")},
		},
		{
			name:       "already labelled: no change",
			labels:     map[string]string{lSriov: "true", "kubernetes.io/hostname": "n1"},
			capacity:   corev1.ResourceList{sriov: qty(8)},
			pools:      []string{sriov},
			poolsKnown: true,
			want:       map[string]*string{},
		},
		{
			name:       "capacity gone to zero: removed; other labels untouched",
			labels:     map[string]string{lSriov: "true", lShared: "true", "rdmanet.io/other": "x", "team": "a"},
			capacity:   corev1.ResourceList{sriov: qty(0), shared: qty(4)},
			pools:      []string{sriov, shared},
			poolsKnown: true,
			want:       map[string]*string{lSriov: nil},
		},
		{
			name:       "pool no longer configured: removed",
			labels:     map[string]string{lSriov: "true", "rdmanet.io/pool.old.com_gone": "true"},
			capacity:   corev1.ResourceList{sriov: qty(8), "old.com/gone": qty(2)},
			pools:      []string{sriov},
			poolsKnown: true,
			want:       map[string]*string{"rdmanet.io/pool.old.com_gone": nil},
		},
		{
			name:       "wrong value fixed",
			labels:     map[string]string{lSriov: "false"},
			capacity:   corev1.ResourceList{sriov: qty(1)},
			pools:      []string{sriov},
			poolsKnown: true,
			want:       map[string]*string{lSriov: str("true")},
		},
		{
			name:        "netns mode mirrored",
			annotations: map[string]string{AnnotationNetnsMode: "exclusive"},
			poolsKnown:  true,
			want:        map[string]*string{LabelNetnsMode: str("exclusive")},
		},
		{
			name:        "netns mode changed",
			labels:      map[string]string{LabelNetnsMode: "exclusive"},
			annotations: map[string]string{AnnotationNetnsMode: "shared"},
			poolsKnown:  true,
			want:        map[string]*string{LabelNetnsMode: str("shared")},
		},
		{
			name:       "annotation gone: label removed",
			labels:     map[string]string{LabelNetnsMode: "shared"},
			poolsKnown: true,
			want:       map[string]*string{LabelNetnsMode: nil},
		},
		{
			name:        "unknown netns mode: no label",
			labels:      map[string]string{LabelNetnsMode: "shared"},
			annotations: map[string]string{AnnotationNetnsMode: "bogus"},
			poolsKnown:  true,
			want:        map[string]*string{LabelNetnsMode: nil},
		},
		{
			name:        "config unreadable: pool labels kept as they are, netns still mirrored",
			labels:      map[string]string{lSriov: "true"},
			annotations: map[string]string{AnnotationNetnsMode: "shared"},
			capacity:    corev1.ResourceList{shared: qty(4)},
			poolsKnown:  false,
			want:        map[string]*string{LabelNetnsMode: str("shared")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := labelChanges(tc.labels, tc.annotations, tc.capacity, tc.pools, tc.poolsKnown)
			if !maps.EqualFunc(got, tc.want, func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }) {
				t.Errorf("labelChanges = %s, want %s", show(got), show(tc.want))
			}
			for k := range got {
				if k != LabelNetnsMode && !strings.HasPrefix(k, LabelPoolPrefix) {
					t.Errorf("touches %q, a label the labeler does not own", k)
				}
			}
		})
	}
}

func show(m map[string]*string) string {
	var parts []string
	for k, v := range m {
		if v == nil {
			parts = append(parts, k+"-")
		} else {
			parts = append(parts, k+"="+*v)
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func TestConfiguredPools(t *testing.T) {
	cm := func(data map[string]string) *corev1.ConfigMap {
		c := &corev1.ConfigMap{Data: data}
		c.Namespace, c.Name = DefaultNamespace, AgentConfigMap
		return c
	}
	sriovJSON := `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"sriov_rdma","selectors":[{"vendors":["15b3"],"isRdma":true}]}]}`
	sharedJSON := `{"configList":[{"resourceName":"hca_shared_devices_a","rdmaHcaMax":100,"selectors":{"vendors":["15b3"]}}]}`
	tests := []struct {
		name    string
		cm      *corev1.ConfigMap
		want    []string
		wantErr string
	}{
		{name: "no ConfigMap: no pools", cm: nil},
		{name: "deploy/node-config.yaml's shape", cm: cm(map[string]string{"config.json": sriovJSON}), want: []string{"example.com/sriov_rdma"}},
		{name: "two keys merged", cm: cm(map[string]string{"a.json": sriovJSON, "b.json": sharedJSON}), want: []string{"example.com/sriov_rdma", "rdma/hca_shared_devices_a"}},
		{name: "invalid config names the ConfigMap and key", cm: cm(map[string]string{"config.json": `{"resourceList":[{"resourceName":"bad name!"}]}`}), wantErr: "ConfigMap rdmanet-system/rdmanet-agent-config key config.json"},
		{name: "duplicate resource across keys", cm: cm(map[string]string{"a.json": sriovJSON, "b.json": sriovJSON}), wantErr: "already defined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := configuredPools(tc.cm)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("configuredPools: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("configuredPools = %v, want %v", got, tc.want)
			}
		})
	}
}
