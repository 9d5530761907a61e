package cluster

import "testing"

func TestPlanNodes(t *testing.T) {
	tests := []struct {
		name          string
		count, shared int
		wantModes     string // one letter per node
		wantNames     []string
		wantErr       bool
	}{
		{name: "single node keeps its names", count: 1, shared: 0, wantModes: "e", wantNames: []string{NodeName}},
		{name: "three nodes, last shared", count: 3, shared: 1, wantModes: "ees", wantNames: []string{NodeName, NodeName + "-2", NodeName + "-3"}},
		{name: "four nodes, two shared", count: 4, shared: 2, wantModes: "eess"},
		{name: "one shared node alone", count: 1, shared: 1, wantModes: "s"},
		{name: "no exclusive node among several", count: 2, shared: 2, wantErr: true},
		{name: "too many nodes", count: MaxNodes + 1, wantErr: true},
		{name: "no nodes", count: 0, wantErr: true},
		{name: "more shared than nodes", count: 2, shared: 3, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes, err := PlanNodes(tc.count, tc.shared)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			seen := map[string]bool{}
			for i, n := range nodes {
				mode := map[string]string{ModeExclusive: "e", ModeShared: "s"}[n.Mode]
				if mode != tc.wantModes[i:i+1] {
					t.Errorf("node %d %s: mode %s, want %s", i, n.Name, n.Mode, tc.wantModes[i:i+1])
				}
				if tc.wantNames != nil && n.Name != tc.wantNames[i] {
					t.Errorf("node %d: name %s, want %s", i, n.Name, tc.wantNames[i])
				}
				for _, v := range []string{n.Name, n.Netns, n.IP, n.PodCIDR, n.ExclusivePFIP(), n.SharedPFIP(), n.CgroupRoot(), FabricPort(n, "vf15")} {
					if seen[v] {
						t.Errorf("node %d: %s shared with another node", i, v)
					}
					seen[v] = true
				}
				if len(FabricPort(n, "vf15")) > 15 {
					t.Errorf("fabric port %s longer than an interface name may be", FabricPort(n, "vf15"))
				}
			}
		})
	}
}

func TestNodeHostPath(t *testing.T) {
	l := Layout{Dir: "/state"}
	nodes, _ := PlanNodes(2, 1)
	tests := []struct {
		name string
		n    Node
		in   string
		want string
	}{
		{name: "first node's kubelet dir", n: nodes[0], in: "/var/lib/kubelet/plugins_registry", want: "/state/node/var/lib/kubelet/plugins_registry"},
		{name: "second node's CNI dir", n: nodes[1], in: "/etc/cni/net.d", want: "/state/node-2/etc/cni/net.d"},
		{name: "sysfs fixture", n: nodes[1], in: "/var/lib/rdmanet-sim/sys/class/net", want: "/state/node-2/sys/class/net"},
		{name: "not a private mount", n: nodes[0], in: "/var/lib/kubeletx", want: "/var/lib/kubeletx"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := l.NodeHostPath(tc.n, tc.in); got != tc.want {
				t.Errorf("NodeHostPath(%s, %s) = %s, want %s", tc.n.Name, tc.in, got, tc.want)
			}
		})
	}
}
