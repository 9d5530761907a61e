package ipam

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// dump renders a Config in a stable, reviewable text form.
func dump(c *Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cniVersion: %s\nnetwork: %s\nstore: type=%s path=%s kubeconfig=%s\nnode: %s\n",
		c.CNIVersion, c.Network, c.Store.Type, c.Store.Path, c.Store.Kubeconfig, c.NodeName)
	for i, r := range c.Ranges {
		fmt.Fprintf(&b, "range[%d]: spec=%s prefix=%s first=%s last=%s usable=%s block=/%d gateway=%v exclude=%v\n",
			i, r.Spec, r.Prefix, r.First, r.Last, r.Size(), r.BlockBits, r.Gateway, r.Exclude)
	}
	for i, rt := range c.Routes {
		fmt.Fprintf(&b, "route[%d]: %s\n", i, rt)
	}
	return b.String()
}

func TestParseGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.conf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".conf")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Parse(in, Env{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := dump(cfg)
			golden := strings.TrimSuffix(f, ".conf") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run: go test ./internal/ipam -run TestParseGolden -update)", err)
			}
			if got != string(want) {
				t.Errorf("parsed config differs from %s:\n got:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// TestSeedConfigTypeOnlyChange: the seed's Whereabouts stanza parses the same
// whichever "type" it carries.
func TestSeedConfigTypeOnlyChange(t *testing.T) {
	for _, typ := range []string{"whereabouts", "rdmanet-ipam"} {
		cfg, err := Parse([]byte(`{"cniVersion":"0.3.1","name":"face-training-rdma","ipam":{"type":"`+typ+`","range":"10.60.0.0/16","exclude":["10.60.0.0/24"]}}`), Env{})
		if err != nil {
			t.Fatalf("type %s: %v", typ, err)
		}
		r := cfg.Ranges[0]
		if r.First.String() != "10.60.0.1" || r.Last.String() != "10.60.255.254" {
			t.Errorf("type %s: bounds %s-%s", typ, r.First, r.Last)
		}
		if first, _ := r.NextUsable(r.First); first.String() != "10.60.1.0" {
			t.Errorf("type %s: first usable %s, want 10.60.1.0 (10.60.0.0/24 excluded)", typ, first)
		}
		if got := r.Size().String(); got != "65279" { // 10.60.0.1-10.60.255.254 minus 10.60.0.1-10.60.0.255
			t.Errorf("type %s: usable %s, want 65279", typ, got)
		}
		if len(cfg.Routes) != 0 {
			t.Errorf("type %s: routes %v, want none (no default route on the training net)", typ, cfg.Routes)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		ipam string
		env  Env
		// every fragment must appear in the message
		want []string
	}{
		{name: "no range", ipam: `{"type":"whereabouts"}`, want: []string{`"range"`, "no range configured", "fix:"}},
		{name: "bad cidr", ipam: `{"range":"10.60.0.0/33"}`, want: []string{`"range" = "10.60.0.0/33"`, "not a CIDR", "fix:"}},
		{name: "dash without prefix", ipam: `{"range":"10.0.0.1-10.0.0.9"}`, want: []string{"needs a prefix length"}},
		{name: "start after end", ipam: `{"range":"10.0.0.0/24","range_start":"10.0.0.9","range_end":"10.0.0.3"}`, want: []string{"is after range_end", "fix:"}},
		{name: "start outside", ipam: `{"range":"10.0.0.0/24","range_start":"10.0.1.9"}`, want: []string{`"range_start"`, "outside the range's CIDR 10.0.0.0/24"}},
		{name: "start conflicts with dash", ipam: `{"range":"10.0.0.5-10.0.0.9/24","range_start":"10.0.0.6"}`, want: []string{"conflicts with the bound"}},
		{name: "gateway outside", ipam: `{"name":"x","range":"10.0.0.0/24","gateway":"10.0.1.1"}`, want: []string{`"gateway" = "10.0.1.1"`, "outside every range (10.0.0.0/24)", "fix:"}},
		{name: "gateway garbage", ipam: `{"range":"10.0.0.0/24","gateway":"ten"}`, want: []string{"not an IP address"}},
		{name: "exclude empties range", ipam: `{"range":"10.60.0.0/24","exclude":["10.60.0.0/25","10.60.0.128/25"]}`, want: []string{`"exclude"`, "no usable address left", "shrink exclude"}},
		{name: "exclude family", ipam: `{"range":"10.60.0.0/24","exclude":["fd00::/64"]}`, want: []string{`"exclude[0]"`, "address family"}},
		{name: "exclude garbage", ipam: `{"range":"10.60.0.0/24","exclude":["x"]}`, want: []string{`"exclude[0]" = "x"`}},
		{name: "overlapping ranges", ipam: `{"ipRanges":[{"range":"10.0.0.0/16"},{"range":"10.0.1.0/24"}]}`, want: []string{"overlaps range"}},
		{name: "ipRanges field names", ipam: `{"ipRanges":[{"range":"10.0.0.0/16"},{"range":"fd00::/64","range_end":"fe00::1"}]}`, want: []string{`"ipRanges[1].range_end"`}},
		{name: "bad datastore", ipam: `{"range":"10.0.0.0/24","datastore":"etcd"}`, want: []string{`"datastore" = "etcd"`, "unsupported"}},
		{name: "kubernetes store without kubeconfig", ipam: `{"range":"10.0.0.0/24","store":{"type":"kubernetes"}}`, want: []string{"needs a kubeconfig"}},
		{name: "unknown store", ipam: `{"range":"10.0.0.0/24","store":{"type":"etcd"}}`, want: []string{`"store.type" = "etcd"`}},
		{name: "slice too big", ipam: `{"range":"10.0.0.0/8","node_slice_size":"/16"}`, want: []string{`"node_slice_size" = "/16"`, "between /20 and /32"}},
		{name: "route without dst", ipam: `{"range":"10.0.0.0/24","routes":[{"gw":"10.0.0.1"}]}`, want: []string{`"routes[0].dst"`}},
		{name: "node file garbage", ipam: `{"range":"10.0.0.0/24"}`, env: Env{NodeConfig: []byte("{")}, want: []string{"node config file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"train","ipam":`+tc.ipam+`}`), tc.env)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not match ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if _, err := Parse([]byte(`{"name":"x"}`), Env{}); err == nil || !strings.Contains(err.Error(), `"ipam"`) {
		t.Errorf("missing ipam: %v", err)
	}
}

func TestStoreSelection(t *testing.T) {
	tests := []struct {
		name      string
		ipam      string
		node      string
		env       Env
		wantType  string
		wantPath  string
		wantKcfg  string
		wantNode  string
		wantNetwk string
	}{
		{name: "default is local", ipam: `{"range":"10.0.0.0/24"}`, wantType: StoreLocal, wantPath: DefaultLocalStorePath, wantNetwk: DefaultNetwork},
		{name: "env store path", ipam: `{"range":"10.0.0.0/24"}`, env: Env{StorePath: "/tmp/x"}, wantType: StoreLocal, wantPath: "/tmp/x", wantNetwk: DefaultNetwork},
		{name: "config path beats env", ipam: `{"range":"10.0.0.0/24","store":{"path":"/a"}}`, env: Env{StorePath: "/tmp/x"}, wantType: StoreLocal, wantPath: "/a", wantNetwk: DefaultNetwork},
		{name: "whereabouts kubeconfig selects kubernetes", ipam: `{"range":"10.0.0.0/24","kubernetes":{"kubeconfig":"/k"}}`, wantType: StoreKubernetes, wantPath: DefaultLocalStorePath, wantKcfg: "/k", wantNetwk: DefaultNetwork},
		{name: "node file selects kubernetes for the seed config", ipam: `{"type":"whereabouts","range":"10.60.0.0/16","exclude":["10.60.0.0/24"]}`,
			node: `{"store":{"type":"kubernetes","kubeconfig":"/etc/k","path":"/var/lib/x"},"node_name":"n7"}`, wantType: StoreKubernetes, wantPath: "/var/lib/x", wantKcfg: "/etc/k", wantNode: "n7", wantNetwk: DefaultNetwork},
		{name: "network config beats node file", ipam: `{"range":"10.0.0.0/24","store":{"type":"local"},"network_name":"a"}`,
			node: `{"store":{"type":"kubernetes","kubeconfig":"/etc/k"},"network_name":"b"}`, wantType: StoreLocal, wantPath: DefaultLocalStorePath, wantKcfg: "/etc/k", wantNetwk: "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if tc.node != "" {
				env.NodeConfig = []byte(tc.node)
			}
			cfg, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"n","ipam":`+tc.ipam+`}`), env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Store.Type != tc.wantType || cfg.Store.Path != tc.wantPath || cfg.Store.Kubeconfig != tc.wantKcfg || cfg.NodeName != tc.wantNode || cfg.Network != tc.wantNetwk {
				t.Errorf("got store %+v node %q network %q", cfg.Store, cfg.NodeName, cfg.Network)
			}
		})
	}
}

func TestNodeConfigPath(t *testing.T) {
	if got := NodeConfigPath([]byte(`{"ipam":{"configuration_path":"/x.conf"}}`)); got != "/x.conf" {
		t.Errorf("got %s", got)
	}
	if got := NodeConfigPath([]byte(`{"ipam":{}}`)); got != DefaultNodeConfigPath {
		t.Errorf("got %s", got)
	}
}
