package ibsriov_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rdmanet-ib-sriov-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := 1
	if err := pluginbin.Build(dir, "github.com/rdmanet/rdmanet/cmd/ib-sriov", pluginbin.HostLocal); err != nil {
		fmt.Fprintln(os.Stderr, "build plugins:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// ibNode is a simulated IB node: a host netns whose IB VF netdevs are veth
// ends, the IB sysfs fixture, the netops recorder, a GUID pool config with
// a hook that logs its calls.
type ibNode struct {
	host    ns.NetNS
	fix     *sysfsfixture.IBNode
	rec     *netops.Recorder
	root    string
	hookLog string
	cni     *libcni.CNIConfig
}

// ipoib names the fixture's Port0 VF netdevs.
func ipoib(i int) string { return fmt.Sprintf("ibp193s0f0v%d", i) }

func newIBNode(t *testing.T, vfGUID func(int) string) *ibNode {
	t.Helper()
	netnsutil.RequireRoot(t)
	root := t.TempDir()
	fix, err := sysfsfixture.NewIBNode(filepath.Join(root, "sys"), sysfsfixture.IBNodeOptions{VFs: 2, VFGUID: vfGUID})
	if err != nil {
		t.Fatal(err)
	}
	n := &ibNode{host: netnsutil.NewNS(t), fix: fix, root: root, rec: netops.NewRecorder(filepath.Join(root, "netops.json")),
		hookLog: filepath.Join(root, "hook.log")}
	netnsutil.SimulateVFs(t, n.host, ipoib(0), ipoib(1))
	if err := n.rec.SetNetnsMode(netops.RDMANetnsExclusive); err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(root, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho \"$RDMANET_HOOK_ACTION $RDMANET_GUID $RDMANET_PKEY $RDMANET_POD_NAMESPACE/$RDMANET_POD_NAME\" >> "+n.hookLog+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pool := map[string]any{
		"ranges": []map[string]string{{"start": "02:00:00:00:00:00:00:01", "end": "02:00:00:00:00:00:00:0f"}},
		"store":  map[string]string{"type": "local", "path": filepath.Join(root, "guid-pool")},
		"hook":   []string{"/bin/sh", hook},
	}
	b, _ := json.Marshal(pool)
	poolFile := filepath.Join(root, "guid-pool.json")
	if err := os.WriteFile(poolFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		netops.EnvImpl:             "record",
		netops.EnvState:            n.rec.StatePath(),
		netops.EnvSysfsRoot:        fix.Root,
		netops.EnvCNIStateDir:      filepath.Join(root, "state"),
		"RDMANET_GUID_POOL_CONFIG": poolFile,
		"NODENAME":                 "ib-node-1",
		netops.EnvFault:            "",
	} {
		t.Setenv(k, v)
	}
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{binDir}, filepath.Join(root, "cni-cache"), nil)
	return n
}

func (n *ibNode) do(f func() error) error {
	var err error
	_ = n.host.Do(func(ns.NetNS) error { err = f(); return nil })
	return err
}

var netnsArg = regexp.MustCompile(`netns (/\S+)`)

// log returns the recorded commands from line from on, pod netns paths as
// <pod>, any other (the host's) as <host>.
func (n *ibNode) log(t *testing.T, from int, pod string) []string {
	t.Helper()
	l, err := n.rec.Log()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range l[from:] {
		out = append(out, netnsArg.ReplaceAllStringFunc(s, func(m string) string {
			if strings.TrimPrefix(m, "netns ") == pod {
				return "netns <pod>"
			}
			return "netns <host>"
		}))
	}
	return out
}

func (n *ibNode) hookCalls(t *testing.T) []string {
	b, err := os.ReadFile(n.hookLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", "|"))
}

// ibSriovConf is an ib-sriov-cni NAD config as its users write it (the
// README's shape: type, pkey, link_state, ibKubernetesEnabled, host-local
// IPAM), with the fields of the case merged in and the deviceID the meta
// plugin injects.
func ibSriovConf(t *testing.T, version, deviceID, dataDir string, extra map[string]any) *libcni.NetworkConfigList {
	t.Helper()
	conf := map[string]any{
		"cniVersion": version, "name": "ib-sriov-network", "type": "ib-sriov",
		"ipam": map[string]any{"type": "host-local", "subnet": "10.56.217.0/24", "routes": []map[string]string{{"dst": "0.0.0.0/0"}},
			"gateway": "10.56.217.1", "dataDir": dataDir},
		"deviceID": deviceID,
	}
	for k, v := range extra {
		if v == nil {
			delete(conf, k)
			continue
		}
		conf[k] = v
	}
	b, _ := json.Marshal(map[string]any{"cniVersion": version, "name": "ib-sriov-network", "plugins": []any{conf}})
	l, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestIBSriovThroughLibcni(t *testing.T) {
	vf0 := sysfsfixture.VFBDF("0000:c1:00.0", 0)
	unbind0 := "echo " + vf0 + " > /sys/bus/pci/drivers/mlx5_core/unbind"
	bind0 := "echo " + vf0 + " > /sys/bus/pci/drivers/mlx5_core/bind"
	guidCmds := func(g string) []string {
		return []string{"ip link set ibp193s0f0 vf 0 node_guid " + g, "ip link set ibp193s0f0 vf 0 port_guid " + g, unbind0, bind0}
	}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name     string
		versions []string
		vfGUID   func(int) string // the fixture VFs' GUIDs before the pod
		deviceID string
		extra    map[string]any
		capArgs  map[string]any
		wantErr  string
		// recorded commands of ADD and of DEL, exactly
		wantAdd, wantDel []string
		wantNet1         bool
		wantIface        string // the result's interface name
		wantMac          string // the result's interface mac (the GUID)
		wantHook         []string
	}{
		{name: "pod GUID from the networks annotation (infiniband-guid → runtimeConfig), link_state, fresh VF reset to all ones on DEL",
			versions: []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}, deviceID: vf0,
			extra:    map[string]any{"pkey": "0x5", "link_state": "enable", "ibKubernetesEnabled": false, "capabilities": map[string]bool{"infinibandGUID": true}},
			capArgs:  map[string]any{"infinibandGUID": "c2:11:22:33:44:55:66:77"},
			wantAdd:  cat([]string{"ip link set ibp193s0f0 vf 0 state enable"}, guidCmds("c2:11:22:33:44:55:66:77")),
			wantDel:  cat(guidCmds("ff:ff:ff:ff:ff:ff:ff:ff"), []string{"ip link set ibp193s0f0 vf 0 state auto"}),
			wantNet1: true, wantIface: "net1", wantMac: "c2:11:22:33:44:55:66:77"},
		{name: "no GUID named: one from the pool, the hook told, RDMA device isolated, the VF's GUID restored on DEL",
			versions: []string{"1.0.0"}, deviceID: vf0, vfGUID: func(i int) string { return fmt.Sprintf("0c:42:a1:03:00:00:10:%02x", i) },
			extra:    map[string]any{"pkey": "0x8005", "rdmaIsolation": true},
			wantAdd:  cat(guidCmds("02:00:00:00:00:00:00:01"), []string{"rdma dev set mlx5_4 netns <pod>"}),
			wantDel:  cat([]string{"rdma dev set mlx5_4 netns <host>"}, guidCmds("0c:42:a1:03:00:00:10:00")),
			wantNet1: true, wantIface: "net1", wantMac: "02:00:00:00:00:00:00:01",
			wantHook: []string{"allocate|02:00:00:00:00:00:00:01|0x8005|ib-jobs/trainer-0", "release|02:00:00:00:00:00:00:01|0x8005|ib-jobs/trainer-0"}},
		{name: "ibKubernetesEnabled: the GUID ib-kubernetes put in args.cni once it configured the pod",
			versions: []string{"0.3.1"}, deviceID: vf0, vfGUID: func(int) string { return "0c:42:a1:03:00:00:20:01" },
			extra: map[string]any{"pkey": "0x5", "ibKubernetesEnabled": true,
				"args": map[string]any{"cni": map[string]string{"guid": "c2:00:00:00:00:00:00:09", "mellanox.infiniband.app": "configured"}}},
			wantAdd:  guidCmds("c2:00:00:00:00:00:00:09"),
			wantDel:  guidCmds("0c:42:a1:03:00:00:20:01"),
			wantNet1: true, wantIface: "net1", wantMac: "c2:00:00:00:00:00:00:09"},
		{name: "ibKubernetesEnabled before ib-kubernetes configured the pod: refused, nothing done",
			versions: []string{"0.3.1"}, deviceID: vf0,
			extra:   map[string]any{"ibKubernetesEnabled": true},
			wantErr: "mellanox.infiniband.app"},
		{name: "IB-only function (RDMA device, no netdev): the RDMA device alone, no net1, no IPAM",
			versions: []string{"1.1.0"}, deviceID: "0000:d1:00.0",
			extra:     map[string]any{"rdmaIsolation": true},
			wantAdd:   []string{"rdma dev set mlx5_3 netns <pod>"},
			wantDel:   []string{"rdma dev set mlx5_3 netns <host>"},
			wantIface: "mlx5_3", wantMac: "0c:42:a1:03:00:65:8e:83"},
	}
	for _, tc := range tests {
		for _, v := range tc.versions {
			t.Run(tc.name+"/"+v, func(t *testing.T) {
				n := newIBNode(t, tc.vfGUID)
				pod := netnsutil.NewNS(t)
				l := ibSriovConf(t, v, tc.deviceID, filepath.Join(n.root, "host-local"), tc.extra)
				rt := &libcni.RuntimeConf{ContainerID: "c0ffee01", NetNS: pod.Path(), IfName: "net1", CapabilityArgs: tc.capArgs,
					Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "ib-jobs"}, {"K8S_POD_NAME", "trainer-0"}, {"K8S_POD_UID", "uid-0"}}}
				var res *current.Result
				err := n.do(func() error {
					r, err := n.cni.AddNetworkList(context.Background(), l, rt)
					if err != nil {
						return err
					}
					res, err = current.NewResultFromResult(r)
					return err
				})
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("ADD error = %v, want one naming %q", err, tc.wantErr)
					}
					if got := n.log(t, 0, pod.Path()); len(got) != 1 || got[0] != "rdma system set netns exclusive" {
						t.Errorf("a refused ADD recorded %q", got)
					}
					return
				}
				if err != nil {
					t.Fatalf("ADD: %v", err)
				}
				addLog := n.log(t, 1, pod.Path())
				if !reflect.DeepEqual(addLog, tc.wantAdd) {
					t.Errorf("ADD recorded\n %q\nwant\n %q", addLog, tc.wantAdd)
				}
				if len(res.Interfaces) != 1 || res.Interfaces[0].Name != tc.wantIface || res.Interfaces[0].Mac != tc.wantMac || res.Interfaces[0].Sandbox != pod.Path() {
					t.Errorf("result interfaces %+v, want %s with mac %s in the pod", res.Interfaces, tc.wantIface, tc.wantMac)
				}
				_, inPod := netnsutil.Link(t, pod, "net1")
				if inPod != tc.wantNet1 {
					t.Errorf("net1 in the pod: %v, want %v (pod has %v)", inPod, tc.wantNet1, netnsutil.Links(t, pod))
				}
				if tc.wantNet1 {
					if a := netnsutil.Addrs(t, pod, "net1"); len(a) != 1 || !strings.HasPrefix(a[0], "10.56.217.") {
						t.Errorf("net1 addresses %v, want one of 10.56.217.0/24", a)
					}
					if len(res.IPs) != 1 {
						t.Errorf("result IPs %v", res.IPs)
					}
				} else if len(res.IPs) != 0 {
					t.Errorf("IB-only result has IPs %v", res.IPs)
				}
				if err := n.do(func() error { return n.cni.CheckNetworkList(context.Background(), l, rt) }); err != nil && v != "0.3.1" {
					t.Errorf("CHECK: %v", err)
				}
				before, _ := n.rec.Log()
				if err := n.do(func() error { return n.cni.DelNetworkList(context.Background(), l, rt) }); err != nil {
					t.Fatalf("DEL: %v", err)
				}
				delLog := n.log(t, len(before), pod.Path())
				if !reflect.DeepEqual(delLog, tc.wantDel) {
					t.Errorf("DEL recorded\n %q\nwant\n %q", delLog, tc.wantDel)
				}
				if tc.wantNet1 {
					if _, ok := netnsutil.Link(t, n.host, ipoib(0)); !ok {
						t.Errorf("%s not back in the host: %v", ipoib(0), netnsutil.Links(t, n.host))
					}
				}
				after, _ := n.rec.Log()
				if err := n.do(func() error { return n.cni.DelNetworkList(context.Background(), l, rt) }); err != nil {
					t.Fatalf("second DEL: %v", err)
				}
				if again := n.log(t, len(after), pod.Path()); len(again) != 0 {
					t.Errorf("a repeated DEL recorded %q", again)
				}
				if got := n.hookCalls(t); !reflect.DeepEqual(got, tc.wantHook) {
					t.Errorf("hook calls %q, want %q", got, tc.wantHook)
				}
				ents, _ := os.ReadDir(filepath.Join(n.root, "state", "ib-sriov"))
				for _, e := range ents {
					t.Errorf("state left after DEL: %s", e.Name())
				}
			})
		}
	}
}
