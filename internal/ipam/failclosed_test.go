package ipam_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/rdmanet/rdmanet/internal/ipam"
)

const seedIPAM = `{"cniVersion":"0.3.1","name":"face-training-rdma","ipam":{"type":"whereabouts","range":"10.60.0.0/16","exclude":["10.60.0.0/24"]}}`

// TestPluginFailsClosed (issue 13, defect 4): unless the local store is
// chosen explicitly, a store that cannot be reached fails ADD with an error
// naming the file or setting to fix, and never hands out a node-local
// address; DEL with nothing to release still succeeds.
func TestPluginFailsClosed(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.kubeconfig")
	if err := os.WriteFile(garbage, []byte("{not yaml: ["), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// node is the node config file's content ("" = absent); env adds variables.
		node  string
		netIP string // ipam object; "" = the seed's
		env   map[string]string
		// wantErr fragments of the ADD error; none: ADD succeeds.
		wantErr []string
	}{
		{name: "nothing configured (was: node-local store)",
			wantErr: []string{`the kubernetes store (selected by the default (no store configured`, "needs a kubeconfig", "/etc/node.conf", `"type": "local"`, ipam.EnvStoreType}},
		{name: "node config file selects kubernetes without kubeconfig", node: `{"store":{"type":"kubernetes"}}`,
			wantErr: []string{`selected by "store.type" in the node config file /etc/node.conf`, "needs a kubeconfig"}},
		{name: "node config file names a missing kubeconfig", node: `{"store":{"type":"kubernetes","kubeconfig":"/nonexistent/rdmanet-ipam.kubeconfig"}}`,
			wantErr: []string{"kubeconfig /nonexistent/rdmanet-ipam.kubeconfig", `set by "store.kubeconfig" in the node config file /etc/node.conf`, "no such file", "never falls back"}},
		{name: "network config names an unreadable kubeconfig", netIP: `{"type":"whereabouts","range":"10.60.0.0/16","kubernetes":{"kubeconfig":"` + garbage + `"}}`,
			wantErr: []string{"kubeconfig " + garbage, `"kubernetes.kubeconfig" in the network config`}},
		{name: "env local does not override a configured kubeconfig", node: `{"kubernetes":{"kubeconfig":"/nonexistent/k"}}`, env: map[string]string{ipam.EnvStoreType: ipam.StoreLocal},
			wantErr: []string{"kubeconfig /nonexistent/k"}},
		{name: "explicit local in the network config", netIP: `{"type":"whereabouts","range":"10.60.0.0/16","store":{"type":"local"}}`},
		{name: "explicit local in the node config file", node: `{"store":{"type":"local"}}`},
		{name: "explicit local in the environment", env: map[string]string{ipam.EnvStoreType: ipam.StoreLocal}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			env := map[string]string{ipam.EnvStorePath: dir, ipam.EnvNodeConfig: "/etc/node.conf", ipam.EnvNodeName: "n1"}
			for k, v := range tc.env {
				env[k] = v
			}
			files := map[string]string{}
			if tc.node != "" {
				files["/etc/node.conf"] = tc.node
			}
			conf := seedIPAM
			if tc.netIP != "" {
				conf = `{"cniVersion":"0.3.1","name":"face-training-rdma","ipam":` + tc.netIP + `}`
			}
			p, out := newTestPlugin(t, env, files)
			var stderr bytes.Buffer
			p.Stderr = &stderr
			args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: []byte(conf)}
			err := p.Add(args)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("ADD: %v", err)
				}
				if err := p.Del(args); err != nil {
					t.Fatalf("DEL: %v", err)
				}
				return
			}
			if !errors.Is(err, ipam.ErrStoreUnavailable) {
				t.Fatalf("ADD error %v, want a store error", err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ADD error %q lacks %q", err, w)
				}
			}
			if out.Len() != 0 {
				t.Errorf("failed ADD printed a result: %s", out)
			}
			if _, err := os.Stat(filepath.Join(dir, "blocks.json")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("failed ADD wrote a node-local store (%v)", err)
			}
			// DEL of the attachment that never got an address succeeds.
			if err := p.Del(args); err != nil {
				t.Fatalf("DEL with nothing to release: %v", err)
			}
			if !strings.Contains(stderr.String(), "reporting success") {
				t.Errorf("DEL left no warning in the log: %q", stderr.String())
			}
		})
	}
}

// TestPluginDelKeepsRecordedAddress: with the store unusable, DEL fails when
// this node's own records show the attachment holds an address (retrying
// after the fix releases it); it succeeds for an attachment they do not know.
func TestPluginDelKeepsRecordedAddress(t *testing.T) {
	dir, cluster := t.TempDir(), t.TempDir()
	files := map[string]string{"/etc/node.conf": `{"store":{"type":"kubernetes","kubeconfig":"/etc/k.kubeconfig"}}`}
	env := map[string]string{ipam.EnvStorePath: dir, ipam.EnvNodeConfig: "/etc/node.conf", ipam.EnvNodeName: "n1"}
	// While the kubeconfig works (a local store stands in for the cluster),
	// the ADD leaves this node's block cache behind.
	working, _ := newTestPlugin(t, env, files)
	working.OpenStore = func(*ipam.Config) (ipam.Store, error) { return &ipam.LocalStore{Dir: cluster}, nil }
	args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: []byte(seedIPAM)}
	if err := working.Add(args); err != nil {
		t.Fatal(err)
	}
	broken, _ := newTestPlugin(t, env, files) // the kubeconfig is gone
	err := broken.Del(args)
	if !errors.Is(err, ipam.ErrStoreUnavailable) || !strings.Contains(err.Error(), "records show it holds 10.60.") || !strings.Contains(err.Error(), "/etc/k.kubeconfig") {
		t.Fatalf("DEL of a recorded attachment with the store unusable: %v, want a failure naming the address and the kubeconfig", err)
	}
	other := &skel.CmdArgs{ContainerID: "c2", IfName: "net1", StdinData: []byte(seedIPAM)}
	if err := broken.Del(other); err != nil {
		t.Fatalf("DEL of an unknown attachment: %v", err)
	}
	// The config is fixed: DEL releases the address.
	if err := working.Del(args); err != nil {
		t.Fatal(err)
	}
	blocks, _ := (&ipam.LocalStore{Dir: cluster}).List(t.Context(), ipam.Pool{}, "")
	for _, b := range blocks {
		if len(b.Spec.Allocations) != 0 {
			t.Fatalf("address left after DEL: %v", b.Spec.Allocations)
		}
	}
}

// TestPluginDelInvalidConfig: a config that does not load cannot have
// allocated anything; DEL succeeds (kubelet retries a failing DEL forever).
func TestPluginDelInvalidConfig(t *testing.T) {
	tests := []struct {
		name  string
		conf  string
		files map[string]string
	}{
		{name: "bad range", conf: `{"cniVersion":"1.0.0","name":"n","ipam":{"range":"10.0.0.0/33","store":{"type":"local"}}}`},
		{name: "no ipam", conf: `{"cniVersion":"1.0.0","name":"n"}`},
		{name: "node config file garbage", conf: seedIPAM, files: map[string]string{"/etc/node.conf": "{"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newTestPlugin(t, map[string]string{ipam.EnvStorePath: t.TempDir(), ipam.EnvNodeConfig: "/etc/node.conf"}, tc.files)
			var stderr bytes.Buffer
			p.Stderr = &stderr
			args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: []byte(tc.conf)}
			if err := p.Add(args); !errors.Is(err, ipam.ErrInvalidConfig) {
				t.Fatalf("ADD: %v, want a config error", err)
			}
			if err := p.Del(args); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			if !strings.Contains(stderr.String(), "does not load") {
				t.Errorf("DEL left no warning: %q", stderr.String())
			}
		})
	}
}

// TestPluginWarnsUnknownKeys (issue 13, defect 11): a misspelled key is a
// warning naming it in the CNI log (stderr and log_file); the ADD goes on.
func TestPluginWarnsUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "ipam.log")
	conf := `{"cniVersion":"1.0.0","name":"train","ipam":{"type":"whereabouts","range":"10.60.0.0/24","rangeStart":"10.60.0.100",
		"log_file":"` + logFile + `","dns":{"nameservers":["10.60.0.53"]}}}`
	p, out := newTestPlugin(t, map[string]string{ipam.EnvStorePath: dir, ipam.EnvStoreType: ipam.StoreLocal}, nil)
	var stderr bytes.Buffer
	p.Stderr = &stderr
	if err := p.Add(&skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: []byte(conf)}); err != nil {
		t.Fatal(err)
	}
	const want = `rdmanet-ipam: network "train": ipam config: unknown key "rangeStart" (ignored; did you mean "range_start"?)`
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
	logged, err := os.ReadFile(logFile)
	if err != nil || !strings.Contains(string(logged), "[warning] "+want) {
		t.Errorf("log_file %q (%v) lacks the warning", logged, err)
	}
	var res current.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	// Whereabouts returns the config's dns in the result; so does rdmanet-ipam.
	if len(res.DNS.Nameservers) != 1 || res.DNS.Nameservers[0] != "10.60.0.53" {
		t.Errorf("result dns %+v, want the configured nameserver", res.DNS)
	}
}
