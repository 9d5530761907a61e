package sim

import (
	"slices"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/cni/ibsriov"
	"github.com/rdmanet/rdmanet/internal/cni/ipoib"
	"github.com/rdmanet/rdmanet/internal/devinfo"
)

// TestIBManifests: the InfiniBand variants of the seeds' networks, as
// ib-sriov-cni and ipoib-cni users write them, are read unchanged by
// rdmanet's ib-sriov and ipoib plugins; their pods request the IB pools and
// attach to them; the ib-sriov network's PKey reaches the network-status
// extension.
func TestIBManifests(t *testing.T) {
	m, err := LoadManifests()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"linkTypes": ["infiniband"]`, `"pfNames": ["ibp193s0f0"]`} {
		if !strings.Contains(string(m.IBSriovConfig), want) {
			t.Errorf("IB SR-IOV pool config lacks %s", want)
		}
	}
	if !strings.Contains(string(m.IBSharedConfig), `"ifNames": ["ibp193s0f1"]`) {
		t.Errorf("IB shared pool config:\n%s", m.IBSharedConfig)
	}
	nads := map[string]nadv1.NetworkAttachmentDefinition{}
	for _, doc := range docSep.Split(string(m.IBNADs), -1) {
		var n nadv1.NetworkAttachmentDefinition
		if err := yaml.UnmarshalStrict([]byte(doc), &n); err != nil {
			t.Fatalf("IB NAD: %v\n%s", err, doc)
		}
		nads[n.Name] = n
	}
	excl, ok := nads["ib-training-rdma"]
	if !ok || excl.Annotations["k8s.v1.cni.cncf.io/resourceName"] != IBExclusiveResource {
		t.Fatalf("ib-sriov NAD: %+v", excl)
	}
	// the meta plugin injects the allocated VF as deviceID
	conf := strings.Replace(excl.Spec.Config, `"type": "ib-sriov",`, `"type": "ib-sriov", "deviceID": "0000:c1:00.2",`, 1)
	c, err := ibsriov.Parse([]byte(conf))
	if err != nil {
		t.Fatalf("ib-sriov reads its users' NAD: %v", err)
	}
	if c.PKey != "0x8005" || c.LinkState != "enable" || !c.RdmaIsolation || c.IBKubernetesEnabled {
		t.Errorf("ib-sriov config %+v", c)
	}
	if ib := devinfo.InfiniBandOf([]byte(excl.Spec.Config), "02:00:00:00:00:00:00:01"); ib == nil || ib.PKey != c.PKey || ib.GUID != "02:00:00:00:00:00:00:01" {
		t.Errorf("network-status extension %+v, want the NAD's pkey %s", ib, c.PKey)
	}
	shared, ok := nads["ib-shared-net"]
	if !ok {
		t.Fatal("no ipoib NAD")
	}
	pc, err := ipoib.Parse([]byte(shared.Spec.Config))
	if err != nil {
		t.Fatalf("ipoib reads its users' NAD: %v", err)
	}
	if pc.Master != "ibp193s0f1" {
		t.Errorf("ipoib master %q", pc.Master)
	}
	if len(ipoib.UnknownKeys([]byte(shared.Spec.Config))) != 0 {
		t.Errorf("ipoib NAD has keys ipoib-cni does not know: %v", ipoib.UnknownKeys([]byte(shared.Spec.Config)))
	}
	for _, tc := range []struct {
		name, mode, wantName, wantResource, wantNetwork string
	}{
		{name: "IB exclusive Job", mode: ModeIBExclusive, wantName: "ib-trainer-1", wantResource: IBExclusiveResource, wantNetwork: "ib-training-rdma"},
		{name: "IPoIB shared Job", mode: ModeIBShared, wantName: "ipoib-trainer-1", wantResource: IBSharedResource, wantNetwork: "ib-shared-net"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := m.Pod(tc.mode, 1, "ib-node", "uid-ib")
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != tc.wantName || p.Namespace != "ai-training" || p.Spec.NodeName != "ib-node" {
				t.Fatalf("pod %s/%s on %s", p.Namespace, p.Name, p.Spec.NodeName)
			}
			if q, ok := p.Spec.Containers[0].Resources.Limits[corev1ResourceName(tc.wantResource)]; !ok || q.Value() != 1 {
				t.Fatalf("limits %v lack %s: 1", p.Spec.Containers[0].Resources.Limits, tc.wantResource)
			}
			if !strings.Contains(p.Annotations["k8s.v1.cni.cncf.io/networks"], tc.wantNetwork) {
				t.Fatalf("networks annotation %q", p.Annotations["k8s.v1.cni.cncf.io/networks"])
			}
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "NCCL_IB_GID_INDEX" {
					t.Errorf("an IB pod sets NCCL_IB_GID_INDEX (InfiniBand needs none)")
				}
			}
		})
	}
	// Run builds the IB nodes: the IB modes are accepted (make demo-ib).
	o := Options{Modes: IBModes}
	if err := o.defaults(); err != nil {
		t.Errorf("IB modes refused: %v", err)
	}
	for _, md := range IBModes {
		if !slices.Contains(AllModes, md) {
			t.Errorf("AllModes %v lacks %s", AllModes, md)
		}
	}
}
