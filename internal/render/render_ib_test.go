package render

import (
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

// ibSpec is the seeds' spec on the IB test node's ports: the exclusive
// pool is the VFs of ibp193s0f0, shared mode a child of ibp193s0f1.
func ibSpec(mode string) Spec {
	s := specFor(mode)
	s.LinkType, s.VLAN = LinkInfiniBand, 0
	s.PFNames = []string{"ibp193s0f0"}
	if mode != ModeHost {
		s.PKey = "0x8005"
	}
	if mode == ModeShared {
		s.PFNames = []string{"ibp193s0f1"}
	}
	return s
}

// TestIBRender: the InfiniBand variant of each mode renders ib-sriov-cni's
// and ipoib-cni's configurations over pools of IB functions, no GID index,
// and passes kubectl rdma lint with nothing above info in its mode.
func TestIBRender(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   Spec
		mode   string
		want   []string
		absent []string
	}{
		{name: "exclusive: ib-sriov + rdma", spec: ibSpec(ModeExclusive), mode: lint.ModeExclusive,
			want: []string{`"type": "ib-sriov"`, `"pkey": "0x8005"`, `"link_state": "enable"`, `"infinibandGUID": true`, `"type": "rdma"`, `"type": "rdmanet-ipam"`,
				`"linkTypes": [`, `"infiniband"`, `"isRdma": true`, "k8s.v1.cni.cncf.io/resourceName: rdmanet.io/sriov_rdma", "value: =net1", "in partition 0x8005"},
			absent: []string{`"type": "sriov"`, `"vlan"`, "NCCL_IB_GID_INDEX", `"spoofchk"`}},
		{name: "exclusive without a PKey: default partition", spec: func() Spec { s := ibSpec(ModeExclusive); s.PKey = ""; return s }(), mode: lint.ModeExclusive,
			want: []string{`"type": "ib-sriov"`, `"infinibandGUID": true`}, absent: []string{`"pkey"`, "in partition"}},
		{name: "shared: ipoib over the IB port + the shared pool", spec: ibSpec(ModeShared), mode: lint.ModeShared,
			want:   []string{`"type": "ipoib"`, `"master": "ibp193s0f1"`, `"pkey": "0x8005"`, `"rdmaHcaMax": 63`, `"ifNames": [`, `"linkTypes": [`, "IPoIB child", "value: =net1"},
			absent: []string{`"type": "macvlan"`, `"mtu"`, `"type": "rdma"`, "NCCL_IB_GID_INDEX"}},
		{name: "shared with a PKey given without the membership bit and an MTU", spec: func() Spec { s := ibSpec(ModeShared); s.PKey = "5"; s.MTU = 4092; return s }(), mode: lint.ModeShared,
			want: []string{`"pkey": "0x8005"`, `"mtu": 4092`}},
		{name: "host: pool of IB functions, NCCL env unchanged", spec: ibSpec(ModeHost), mode: lint.ModeHost,
			want:   []string{"hostNetwork: true", "value: =ibp193s0f0", `"linkTypes": [`, "shared InfiniBand HCA pool"},
			absent: []string{"NetworkAttachmentDefinition", "NCCL_IB_GID_INDEX"}},
		{name: "exclusive, two IB rails", spec: func() Spec {
			s := ibSpec(ModeExclusive)
			s.PFNames = []string{"ibp193s0f0", "ibp194s0f0"}
			s.Subnet, s.Exclude, s.Subnets = "", nil, []string{"10.60.0.0/16", "10.61.0.0/16"}
			return s
		}(), mode: lint.ModeExclusive, want: []string{"face-trainer-rdma-0", "face-trainer-rdma-1", `"type": "ib-sriov"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := renderString(t, tc.spec)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(out, a) {
					t.Errorf("output has %q:\n%s", a, out)
				}
			}
			objs, err := manifest.Parse("rendered.yaml", []byte(out))
			if err != nil {
				t.Fatalf("rendered output does not parse: %v\n%s", err, out)
			}
			res, err := lint.Lint(objs)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Workloads) != 1 || res.Workloads[0].Mode != tc.mode {
				t.Fatalf("workloads %+v, want one in mode %s", res.Workloads, tc.mode)
			}
			for _, f := range res.Findings {
				if f.Severity != lint.Info {
					t.Errorf("lint: %s %s %s: %s", f.Severity, f.Rule, f.Field, f.Message)
				}
			}
		})
	}
}

func TestIBValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{name: "unknown link type", spec: func() Spec { s := specFor(ModeShared); s.LinkType = "ib"; return s }(), want: "linkType"},
		{name: "PKey on RoCE", spec: func() Spec { s := specFor(ModeShared); s.PKey = "0x8005"; return s }(), want: "pkey \"0x8005\": applies to InfiniBand only"},
		{name: "PKey of partition 0", spec: func() Spec { s := ibSpec(ModeExclusive); s.PKey = "0x8000"; return s }(), want: "partition number other than 0"},
		{name: "PKey not hex", spec: func() Spec { s := ibSpec(ModeExclusive); s.PKey = "blue"; return s }(), want: "pkey"},
		{name: "PKey in host mode", spec: func() Spec { s := ibSpec(ModeHost); s.PKey = "0x8005"; return s }(), want: "host mode has no network"},
		{name: "VLAN on an IB VF", spec: func() Spec { s := ibSpec(ModeExclusive); s.VLAN = 200; return s }(), want: "InfiniBand VFs have no VLAN"},
		{name: "IPoIB MTU too large", spec: func() Spec { s := ibSpec(ModeShared); s.MTU = 70000; return s }(), want: "1280..65520"},
		{name: "DRA on InfiniBand", spec: func() Spec { s := ibSpec(ModeExclusive); s.DRA = true; return s }(), want: "device plugin pools only"},
		{name: "macvlan on an IPoIB port names the IB variant", spec: func() Spec { s := specFor(ModeShared); s.PFNames = []string{"ibp193s0f1"}; return s }(), want: "--link-type infiniband"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Render(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
