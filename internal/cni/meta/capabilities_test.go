package meta_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// clusterNetWithMeta is the default network as a CNI chain: bridge, then
// the upstream portmap and bandwidth plugins, each declaring its capability.
const clusterNetWithMeta = `{"cniVersion":"1.0.0","name":"k8s-pod-network","plugins":[
  {"type":"bridge","bridge":"cni0","isDefaultGateway":true,"ipMasq":false,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.1.0/24"}]],"dataDir":"%s"}},
  {"type":"portmap","capabilities":{"portMappings":true},"backend":"iptables"},
  {"type":"bandwidth","capabilities":{"bandwidth":true}}]}`

// inHost runs a command in the rig's host namespace (the node's, where the
// bridge, portmap's rules and bandwidth's qdiscs live).
func (r *rig) inHost(name string, args ...string) string {
	r.t.Helper()
	var out []byte
	netnsutil.Do(r.t, r.host, func() error {
		var err error
		out, err = exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
		}
		return nil
	})
	return string(out)
}

// TestClusterNetworkGetsRuntimeCapabilities: the runtime's capability args
// (hostPort mappings, bandwidth) reach the cluster network's delegates that
// declare them, as Multus passes them to its cluster network: portmap
// installs its DNAT rule, bandwidth its qdiscs and ifb device, and DEL
// removes them (defect 9).
func TestClusterNetworkGetsRuntimeCapabilities(t *testing.T) {
	for _, tool := range []string{"iptables-save", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	r := newRig(t)
	r.write("conf/00-default.conflist", fmt.Sprintf(clusterNetWithMeta, filepath.Join(r.dir, "ipam")))
	// what a runtime does: rdmanet's config declares the capabilities, the
	// runtime's libcni passes them as runtimeConfig
	r.conf["capabilities"] = map[string]any{"portMappings": true, "bandwidth": true}
	r.podManifest("ai-training", "trainer-0", "", "")
	rt := r.rt("c1", "ai-training", "trainer-0")
	rt.CapabilityArgs = map[string]any{
		"portMappings": []map[string]any{{"hostPort": 18080, "containerPort": 80, "protocol": "tcp"}},
		"bandwidth":    map[string]any{"ingressRate": 8000000, "ingressBurst": 16000000, "egressRate": 4000000, "egressBurst": 8000000},
	}
	run := func(f func(*libcni.CNIConfig, *libcni.NetworkConfigList) error) error {
		return r.host.Do(func(ns.NetNS) error { return f(r.cni, r.metaList("1.0.0")) })
	}
	if err := run(func(c *libcni.CNIConfig, l *libcni.NetworkConfigList) error {
		_, err := c.AddNetworkList(context.Background(), l, rt)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	nat := r.inHost("iptables-save", "-t", "nat")
	if !strings.Contains(nat, "--dport 18080") || !strings.Contains(nat, "--to-destination 10.244.1.") {
		t.Fatalf("portmap did not get portMappings: no DNAT for host port 18080:\n%s", nat)
	}
	ifb := ""
	for _, l := range netnsutil.Links(t, r.host) {
		if strings.HasPrefix(l, "bwp") {
			ifb = l
		}
	}
	if ifb == "" {
		t.Fatalf("bandwidth did not get its capability: no ifb device in the host (%v)", netnsutil.Links(t, r.host))
	}
	if q := r.inHost("tc", "qdisc", "show", "dev", ifb); !strings.Contains(q, "tbf") {
		t.Fatalf("no tbf qdisc on %s (egress shaping):\n%s", ifb, q)
	}
	if q := r.inHost("tc", "qdisc", "show"); strings.Count(q, "tbf") < 2 {
		t.Fatalf("want tbf qdiscs for both directions:\n%s", q)
	}
	if err := run(func(c *libcni.CNIConfig, l *libcni.NetworkConfigList) error {
		return c.DelNetworkList(context.Background(), l, rt)
	}); err != nil {
		t.Fatal(err)
	}
	if nat := r.inHost("iptables-save", "-t", "nat"); strings.Contains(nat, "--dport 18080") {
		t.Fatalf("DEL left portmap's rule:\n%s", nat)
	}
	for _, l := range netnsutil.Links(t, r.host) {
		if l == ifb {
			t.Fatalf("DEL left the ifb device %s", ifb)
		}
	}
}

// TestDefaultNetworksAttachedInPod: defaultNetworks become net1, ... in the
// pod before the annotation's attachments, listed in network-status; an
// unknown key of the config is warned about in the CNI log (defects 10, 11).
func TestDefaultNetworksAttachedInPod(t *testing.T) {
	r := newRig(t)
	r.conf["defaultNetworks"] = []string{"sidecar"}
	r.conf["concurentNetworks"] = true // misspelt: a warning, not a silent no-op
	r.nad("kube-system", "sidecar", "", macvlanConf("sidecar", "roce0", "10.71.0.0/24", r))
	r.nad("ai-training", "train", "", macvlanConf("train", "roce0", "10.72.0.0/24", r))
	r.podManifest("ai-training", "trainer-0", "train", "")
	if _, err := r.add("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	if a := netnsutil.Addrs(t, r.pod, "net1"); len(a) != 1 || !strings.HasPrefix(a[0], "10.71.") {
		t.Fatalf("net1 addresses %v, want the defaultNetwork's 10.71.0.0/24", a)
	}
	if a := netnsutil.Addrs(t, r.pod, "net2"); len(a) != 1 || !strings.HasPrefix(a[0], "10.72.") {
		t.Fatalf("net2 addresses %v, want the annotation's 10.72.0.0/24", a)
	}
	st := r.status("ai-training", "trainer-0")
	if len(st) != 3 || st[1].Name != "kube-system/sidecar" || st[1].Interface != "net1" || st[2].Name != "ai-training/train" || st[2].Interface != "net2" {
		t.Fatalf("network-status = %+v", st)
	}
	if log := r.log(); !strings.Contains(log, `unknown key \"concurentNetworks\"`) || !strings.Contains(log, `did you mean \"concurrentNetworks\"`) {
		t.Fatalf("no warning about the misspelt key in the CNI log:\n%s", log)
	}
	if err := r.del("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	if links := netnsutil.Links(t, r.pod); len(links) != 1 {
		t.Fatalf("DEL left %v", links)
	}
}
