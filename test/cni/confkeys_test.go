package cni_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// TestUnknownKeysWarned (issue 13, defect 11): the seed NAD with a
// misspelled sriov key (`vlan_id`) and a stray rdma key still attaches,
// and each plugin names the key and the one meant in the CNI log (its
// stderr, which the runtime logs).
func TestUnknownKeysWarned(t *testing.T) {
	n := newNode(t, 1)
	pod := netnsutil.NewNS(t)
	const i = 0
	var m map[string]any
	if err := json.Unmarshal([]byte(seedNAD), &m); err != nil {
		t.Fatal(err)
	}
	m["cniVersion"] = "1.0.0"
	plugins := m["plugins"].([]any)
	plugins[0].(map[string]any)["vlan_id"] = 300
	plugins[1].(map[string]any)["vlanQoS"] = 3
	for _, p := range plugins {
		p.(map[string]any)["deviceID"] = vfBDF(i)
	}
	b, _ := json.Marshal(m)
	l, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	c := libcni.NewCNIConfigWithCacheDir([]string{binDir}, filepath.Join(n.root, "cache-keys"),
		&invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: &stderr}, PluginDecoder: version.PluginDecoder{}})
	r := rt(i, pod)
	var addErr error
	_ = n.inHost(func() error { _, addErr = c.AddNetworkList(t.Context(), l, r); return nil })
	if addErr != nil {
		t.Fatalf("ADD with unknown keys failed: %v", addErr)
	}
	for _, want := range []string{
		`sriov config: unknown key "vlan_id" is ignored (did you mean "vlan"?) (network "face-training-rdma", container ` + containerID(i) + `)`,
		`rdma config: unknown key "vlanQoS" is ignored (network "face-training-rdma"`,
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("CNI log %q does not say %q", stderr.String(), want)
		}
	}
	if strings.Contains(stderr.String(), `"vlan"`+" is ignored") || strings.Count(stderr.String(), "unknown key") != 2 {
		t.Errorf("CNI log warns about more than the two unknown keys: %q", stderr.String())
	}
	// vlan_id had no effect: the VF has the seed's vlan 200, not 300
	st, err := n.rec.VFState("enp65s0f0np0", i)
	if err != nil {
		t.Fatal(err)
	}
	if st.Vlan != 200 {
		t.Errorf("VF vlan %d, want the seed's 200 (vlan_id is not read)", st.Vlan)
	}
	var delErr error
	_ = n.inHost(func() error { delErr = c.DelNetworkList(t.Context(), l, r); return nil })
	if delErr != nil {
		t.Fatal(delErr)
	}
	n.assertRestored(t, i, containerID(i))
}
