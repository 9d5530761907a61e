package meta

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fixedDevices Devices

func (f fixedDevices) PodDevices(context.Context, string, string) (*Allocation, error) {
	return &Allocation{Devices: Devices(f)}, nil
}

// staticNADs writes NADs (namespace/name -> resourceName, "" for none) as
// manifests for a StaticSource.
func staticNADs(t *testing.T, nads map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for key, res := range nads {
		ns, name, _ := strings.Cut(key, "/")
		ann := ""
		if res != "" {
			ann = fmt.Sprintf("\n  annotations:\n    k8s.v1.cni.cncf.io/resourceName: %s", res)
		}
		y := fmt.Sprintf("apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: %s\n  namespace: %s%s\nspec:\n  config: '{\"cniVersion\":\"1.0.0\",\"type\":\"sriov\"}'\n", name, ns, ann)
		if err := os.WriteFile(filepath.Join(dir, ns+"-"+name+".yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testPlugin(t *testing.T, conf string, nads map[string]string, devs Devices) *Plugin {
	t.Helper()
	c, err := ParseConfig([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	dir := staticNADs(t, nads)
	return &Plugin{Conf: c, Source: &StaticSource{Dir: dir, StatusDir: t.TempDir()}, Devices: fixedDevices(devs), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

const staticConf = `{"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet","clusterNetwork":"cn","source":{"type":"static","dir":"/unused"}%s}`

func podWith(ns, networks string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainer-0", Annotations: map[string]string{NetworksAnnotation: networks}}}
}

// TestDeviceIDMustBeAllocated: the device of a NAD with a resourceName
// comes from kubelet's allocation; an annotation's deviceID is used only
// when it is one of those devices, and refused otherwise, also for a NAD
// without resourceName (defect 3).
func TestDeviceIDMustBeAllocated(t *testing.T) {
	const res = "example.com/sriov_rdma"
	nads := map[string]string{"ai/rdma": res, "ai/rdma2": res, "ai/plain": ""}
	mine := Devices{res: {"0000:41:00.2", "0000:41:00.3"}}
	tests := []struct {
		name     string
		networks string
		devs     Devices
		want     []string // delegates' deviceIDs, in order
		wantErr  []string
	}{
		{name: "no deviceID: kubelet's first", networks: `[{"name":"rdma"}]`, devs: mine, want: []string{"0000:41:00.2"}},
		{name: "deviceID among the pod's devices", networks: `[{"name":"rdma","deviceID":"0000:41:00.3"}]`, devs: mine, want: []string{"0000:41:00.3"}},
		{name: "chosen device is skipped by the next attachment", networks: `[{"name":"rdma2"},{"name":"rdma","deviceID":"0000:41:00.2"}]`, devs: mine,
			want: []string{"0000:41:00.3", "0000:41:00.2"}},
		{name: "another pod's VF", networks: `[{"name":"rdma","deviceID":"0000:41:00.7"}]`, devs: mine,
			wantErr: []string{"ai/trainer-0", "ai/rdma", `"0000:41:00.7"`, "allowed devices: 0000:41:00.2, 0000:41:00.3", res}},
		{name: "a pod with no devices names one", networks: `[{"name":"rdma","deviceID":"0000:41:00.2"}]`, devs: Devices{},
			wantErr: []string{"ai/trainer-0", "ai/rdma", `"0000:41:00.2"`, "allowed devices: none"}},
		{name: "same device twice", networks: `[{"name":"rdma","deviceID":"0000:41:00.2"},{"name":"rdma2","deviceID":"0000:41:00.2"}]`, devs: mine,
			wantErr: []string{"both ask for deviceID"}},
		{name: "deviceID on a NAD without resourceName", networks: `[{"name":"plain","deviceID":"0000:41:00.2"}]`, devs: mine,
			wantErr: []string{"ai/plain", `"0000:41:00.2"`, "no k8s.v1.cni.cncf.io/resourceName"}},
		{name: "more attachments than devices", networks: `rdma,rdma2,rdma`, devs: mine,
			wantErr: []string{"allocated the pod 2 such device(s) for 3 attachment(s)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testPlugin(t, fmt.Sprintf(staticConf, ""), nads, tc.devs)
			dels, err := p.attachments(context.Background(), podWith("ai", tc.networks))
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; delegates %+v", dels)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range dels {
				got = append(got, d.DeviceID)
				if !strings.Contains(string(d.Conf), `"deviceID":"`+d.DeviceID+`"`) {
					t.Errorf("%s: config %s lacks the deviceID", d.Network, d.Conf)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("deviceIDs %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDefaultNetworksAndIsolation: defaultNetworks come first (net1, ...),
// with their NAD's device, except in systemNamespaces; namespace isolation
// (on by default) refuses another namespace's NAD and allows "default"'s
// (defect 10).
func TestDefaultNetworksAndIsolation(t *testing.T) {
	const res = "example.com/sriov_rdma"
	nads := map[string]string{"kube-system/sidecar": res, "ai/rdma": "", "default/shared": "", "other/private": "", "kube-system/admin": ""}
	devs := Devices{res: {"0000:41:00.4"}}
	tests := []struct {
		name     string
		extra    string
		ns       string
		networks string
		want     []string // network@ifname
		wantErr  string
	}{
		{name: "defaultNetworks first, annotation after", extra: `,"defaultNetworks":["sidecar"]`, ns: "ai", networks: `rdma`,
			want: []string{"kube-system/sidecar@net1", "ai/rdma@net2"}},
		{name: "systemNamespaces get no defaultNetworks", extra: `,"defaultNetworks":["sidecar"]`, ns: "kube-system", networks: ``},
		{name: "annotation may not take a defaultNetwork's interface", extra: `,"defaultNetworks":["sidecar"]`, ns: "ai", networks: `rdma@net1`,
			wantErr: "defaultNetworks"},
		{name: "isolation on by default: other namespace refused", ns: "ai", networks: `other/private`, wantErr: "refused by namespaceIsolation"},
		{name: "isolation on by default: multusNamespace is not global", ns: "ai", networks: `kube-system/admin`, wantErr: "refused by namespaceIsolation"},
		{name: "default namespace is global", ns: "ai", networks: `default/shared`, want: []string{"default/shared@net1"}},
		{name: "isolation off", extra: `,"namespaceIsolation":false`, ns: "ai", networks: `other/private`, want: []string{"other/private@net1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testPlugin(t, fmt.Sprintf(staticConf, tc.extra), nads, devs)
			dels, err := p.attachments(context.Background(), podWith(tc.ns, tc.networks))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range dels {
				got = append(got, d.Network+"@"+d.IfName)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("delegates %v, want %v", got, tc.want)
			}
			if len(dels) > 0 && dels[0].Network == "kube-system/sidecar" && dels[0].DeviceID != "0000:41:00.4" {
				t.Fatalf("defaultNetwork with a resourceName got device %q", dels[0].DeviceID)
			}
		})
	}
}
