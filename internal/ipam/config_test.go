package ipam

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// dump renders a Config in a stable, reviewable text form.
func dump(c *Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cniVersion: %s\nnetwork: %s\nstore: type=%s path=%s kubeconfig=%s\nnode: %s\noverlapping_ranges: %t\n",
		c.CNIVersion, c.Network, c.Store.Type, c.Store.Path, c.Store.Kubeconfig, c.NodeName, c.OverlappingRanges)
	for i, r := range c.Ranges {
		fmt.Fprintf(&b, "range[%d]: spec=%s prefix=%s first=%s last=%s usable=%s block=/%d gateway=%v exclude=%v\n",
			i, r.Spec, r.Prefix, r.First, r.Last, r.Size(), r.BlockBits, r.Gateway, r.Exclude)
	}
	for i, rt := range c.Routes {
		fmt.Fprintf(&b, "route[%d]: %s\n", i, rt)
	}
	for _, w := range c.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
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
		{name: "dash without prefix", ipam: `{"range":"10.0.0.1-10.0.0.9"}`, want: []string{`"10.0.0.9" is not a CIDR (a start-end range is written start-end/prefix)`}},
		{name: "dash start outside its CIDR", ipam: `{"range":"192.168.1.5-192.168.2.25/28"}`, want: []string{"range start 192.168.1.5 is outside the CIDR 192.168.2.16/28"}},
		{name: "gateway outside with a route through it", ipam: `{"name":"x","range":"10.0.0.0/24","gateway":"10.0.1.1","routes":[{"dst":"10.9.0.0/16","gw":"10.0.0.9"},{"dst":"0.0.0.0/0"}]}`,
			want: []string{`"gateway" = "10.0.1.1"`, "outside every range (10.0.0.0/24), and routes[1] (dst 0.0.0.0/0) has no \"gw\"", "network is unreachable", "fix:"}},
		{name: "gateway garbage", ipam: `{"range":"10.0.0.0/24","gateway":"ten"}`, want: []string{"not an IP address"}},
		{name: "exclude empties range", ipam: `{"range":"10.60.0.0/24","exclude":["10.60.0.0/25","10.60.0.128/25"]}`, want: []string{`"exclude"`, "no usable address left", "shrink exclude"}},
		{name: "exclude garbage", ipam: `{"range":"10.60.0.0/24","exclude":["x"]}`, want: []string{`"exclude[0]" = "x"`}},
		{name: "overlapping ranges", ipam: `{"ipRanges":[{"range":"10.0.0.0/16"},{"range":"10.0.1.0/24"}]}`, want: []string{"overlaps range"}},
		{name: "ipRanges bounds are strict", ipam: `{"ipRanges":[{"range":"10.0.0.0/16"},{"range":"10.1.0.0/16","range_start":"010.1.0.5"}]}`, want: []string{`"ipRanges[1].range_start" = "010.1.0.5"`, "decodes the bounds of ipRanges entries strictly"}},
		{name: "host-local ranges", ipam: `{"ranges":[[{"subnet":"10.0.0.0/24"}]]}`, want: []string{`"ranges"`, "host-local", `"ipRanges": [{"range"`}},
		{name: "unknown store", ipam: `{"range":"10.0.0.0/24","store":{"type":"etcd"}}`, want: []string{`"store.type" = "etcd"`, `set by "store.type" in the network config`}},
		{name: "unknown store from env", ipam: `{"range":"10.0.0.0/24"}`, env: Env{StoreType: "file"}, want: []string{`"store.type" = "file"`, "$" + EnvStoreType}},
		{name: "slice not a length", ipam: `{"range":"10.0.0.0/8","node_slice_size":"/33"}`, want: []string{`"node_slice_size" = "/33"`, "not a prefix length"}},
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
	const nodeFile = `"store.type" in the node config file ` + DefaultNodeConfigPath
	tests := []struct {
		name      string
		ipam      string
		node      string
		env       Env
		wantType  string
		wantFrom  string // prefix of Store.TypeFrom
		wantPath  string
		wantKcfg  string
		wantNode  string
		wantNetwk string
	}{
		// Fail closed (issue 13, defect 4): with nothing configured the
		// store is kubernetes, which then fails ADD for want of a kubeconfig;
		// it was the node-local store.
		{name: "default is kubernetes, not local", ipam: `{"range":"10.0.0.0/24"}`, wantType: StoreKubernetes, wantFrom: "the default (no store configured", wantPath: DefaultLocalStorePath, wantNetwk: DefaultNetwork},
		{name: "env selects local explicitly", ipam: `{"range":"10.0.0.0/24"}`, env: Env{StoreType: StoreLocal, StorePath: "/tmp/x"}, wantType: StoreLocal, wantFrom: "$" + EnvStoreType, wantPath: "/tmp/x", wantNetwk: DefaultNetwork},
		{name: "config path beats env", ipam: `{"range":"10.0.0.0/24","store":{"type":"local","path":"/a"}}`, env: Env{StorePath: "/tmp/x"}, wantType: StoreLocal, wantFrom: `"store.type" in the network config`, wantPath: "/a", wantNetwk: DefaultNetwork},
		{name: "whereabouts kubeconfig selects kubernetes", ipam: `{"range":"10.0.0.0/24","kubernetes":{"kubeconfig":"/k"}}`, wantType: StoreKubernetes, wantFrom: `"kubernetes.kubeconfig" in the network config`, wantPath: DefaultLocalStorePath, wantKcfg: "/k", wantNetwk: DefaultNetwork},
		{name: "top-level kubeconfig selects kubernetes", ipam: `{"range":"10.0.0.0/24","kubeconfig":"/k"}`, wantType: StoreKubernetes, wantFrom: `"kubeconfig" in the network config`, wantPath: DefaultLocalStorePath, wantKcfg: "/k", wantNetwk: DefaultNetwork},
		{name: "kubeconfig beats env local", ipam: `{"range":"10.0.0.0/24"}`, node: `{"kubernetes":{"kubeconfig":"/k"}}`, env: Env{StoreType: StoreLocal}, wantType: StoreKubernetes, wantFrom: `"kubernetes.kubeconfig" in the node config file`, wantPath: DefaultLocalStorePath, wantKcfg: "/k", wantNetwk: DefaultNetwork},
		{name: "node file selects kubernetes for the seed config", ipam: `{"type":"whereabouts","range":"10.60.0.0/16","exclude":["10.60.0.0/24"]}`,
			node: `{"store":{"type":"kubernetes","kubeconfig":"/etc/k","path":"/var/lib/x"},"node_name":"n7"}`, wantType: StoreKubernetes, wantFrom: nodeFile, wantPath: "/var/lib/x", wantKcfg: "/etc/k", wantNode: "n7", wantNetwk: DefaultNetwork},
		{name: "node file without kubeconfig stays kubernetes", ipam: `{"range":"10.0.0.0/24"}`, node: `{"store":{"type":"kubernetes"}}`, env: Env{StoreType: StoreLocal}, wantType: StoreKubernetes, wantFrom: nodeFile, wantPath: DefaultLocalStorePath, wantNetwk: DefaultNetwork},
		{name: "network config beats node file", ipam: `{"range":"10.0.0.0/24","store":{"type":"local"},"network_name":"a"}`,
			node: `{"store":{"type":"kubernetes","kubeconfig":"/etc/k"},"network_name":"b"}`, wantType: StoreLocal, wantFrom: `"store.type" in the network config`, wantPath: DefaultLocalStorePath, wantKcfg: "/etc/k", wantNetwk: "a"},
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
			if !strings.HasPrefix(cfg.Store.TypeFrom, tc.wantFrom) {
				t.Errorf("store type chosen by %q, want %q...", cfg.Store.TypeFrom, tc.wantFrom)
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

func TestOverlappingRangesSetting(t *testing.T) {
	tests := []struct {
		name      string
		ipam      string
		node      string
		want      bool
		wantBlock int // block prefix length of the first range
	}{
		{name: "default protects", ipam: `{"range":"10.0.0.0/28"}`, want: true, wantBlock: 27},
		{name: "explicit true", ipam: `{"range":"10.0.0.0/24","enable_overlapping_ranges":true}`, want: true, wantBlock: 27},
		{name: "opt out keeps blocks inside the range", ipam: `{"range":"10.0.0.0/28","enable_overlapping_ranges":false}`, want: false, wantBlock: 28},
		// Whereabouts ignores the flat file's enable_overlapping_ranges (Parse warns).
		{name: "node file cannot opt out", ipam: `{"range":"10.0.0.0/24"}`, node: `{"enable_overlapping_ranges":false}`, want: true, wantBlock: 27},
		{name: "network config beats node file", ipam: `{"range":"10.0.0.0/24","enable_overlapping_ranges":true}`, node: `{"enable_overlapping_ranges":false}`, want: true, wantBlock: 27},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"n","ipam":`+tc.ipam+`}`), Env{NodeConfig: []byte(tc.node)})
			if err != nil {
				t.Fatal(err)
			}
			r := cfg.Ranges[0]
			if cfg.OverlappingRanges != tc.want || r.Isolated == tc.want || cfg.Pool(r).Isolated == tc.want {
				t.Errorf("overlapping ranges %t, range isolated %t, pool %+v; want protection %t", cfg.OverlappingRanges, r.Isolated, cfg.Pool(r), tc.want)
			}
			if r.BlockBits != tc.wantBlock {
				t.Errorf("block /%d, want /%d", r.BlockBits, tc.wantBlock)
			}
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	// Every key of Whereabouts' IPAMConfig (and rdmanet's own) is known.
	whereabouts := `{"type":"whereabouts","name":"x","range":"10.0.0.0/24","range_start":"10.0.0.2","range_end":"10.0.0.9",
		"exclude":["10.0.0.4"],"ipRanges":[{"range":"fd00::/64","range_start":"fd00::2","range_end":"fd00::9","exclude":["fd00::4"]}],
		"gateway":"10.0.0.1","network_name":"n","routes":[],"dns":{"nameservers":["10.0.0.53"]},"addresses":[],"node_slice_size":"/28",
		"enable_overlapping_ranges":true,"datastore":"kubernetes","kubernetes":{"kubeconfig":"/k","k8s_api_root":"https://x"},
		"kubeconfig":"/k","configuration_path":"/c","log_file":"/l","log_level":"debug","leader_lease_duration":1,
		"leader_renew_deadline":1,"leader_retry_period":1,"reconciler_cron_expression":"* * * * *","sleep_for_race":0,
		"lease_duration":1,"backoff":1,"etcd_host":"h","etcd_username":"u","etcd_password":"p","etcd_key_file":"k",
		"etcd_cert_file":"c","etcd_ca_cert_file":"a","store":{"type":"local","path":"/p","kubeconfig":"/k"},"node_name":"n",
		"Range_Start":"10.0.0.2"}`
	tests := []struct {
		name string
		ipam string
		want []string // UnknownKey.String() of each, sorted by path
	}{
		{name: "every whereabouts and rdmanet key", ipam: whereabouts},
		{name: "camel case", ipam: `{"range":"10.0.0.0/24","rangeStart":"10.0.0.5"}`,
			want: []string{`unknown key "rangeStart" (ignored; did you mean "range_start"?)`}},
		{name: "typo", ipam: `{"range":"10.0.0.0/24","exlude":["10.0.0.4"],"netwrok_name":"a"}`,
			want: []string{`unknown key "exlude" (ignored; did you mean "exclude"?)`, `unknown key "netwrok_name" (ignored; did you mean "network_name"?)`}},
		{name: "nested", ipam: `{"ipRanges":[{"range":"10.0.0.0/24"},{"range":"fd00::/64","rangeEnd":"fd00::9"}],"kubernetes":{"kube_config":"/k"},"store":{"dir":"/x"}}`,
			want: []string{`unknown key "ipRanges[1].rangeEnd" (ignored; did you mean "range_end"?)`, `unknown key "kubernetes.kube_config" (ignored; did you mean "kubeconfig"?)`, `unknown key "store.dir" (ignored)`}},
		{name: "nothing close", ipam: `{"range":"10.0.0.0/24","vlan":7}`, want: []string{`unknown key "vlan" (ignored)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal([]byte(tc.ipam), &m); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range UnknownKeys(m) {
				got = append(got, u.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("unknown keys\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestParseWarnsUnknownKeys: Parse turns unknown keys of the network config
// and of the node config file into warnings naming the key and the file.
func TestParseWarnsUnknownKeys(t *testing.T) {
	cfg, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"train","ipam":{"type":"whereabouts","range":"10.0.0.0/24","rangeStart":"10.0.0.5"}}`),
		Env{NodeConfig: []byte(`{"store":{"type":"local"},"node_nmae":"n1"}`), NodeConfigPath: "/etc/node.conf"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`rdmanet-ipam: network "train": ipam config: unknown key "rangeStart" (ignored; did you mean "range_start"?)`,
		`rdmanet-ipam: network "train": node config file /etc/node.conf: unknown key "node_nmae" (ignored; did you mean "node_name"?)`,
	}
	if !slices.Equal(cfg.Warnings, want) {
		t.Errorf("warnings\n%q\nwant\n%q", cfg.Warnings, want)
	}
	if first, _ := cfg.Ranges[0].NextUsable(cfg.Ranges[0].First); first.String() != "10.0.0.1" {
		t.Errorf("the misspelled range_start took effect: first usable %s", first)
	}
}
