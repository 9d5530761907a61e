package meta

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestUnknownKeysWarn: a misspelt key is a warning naming the key and, when
// one is close, the key meant; every key of Multus' documented config and
// the keys a runtime adds are accepted silently (defect 11).
func TestUnknownKeysWarn(t *testing.T) {
	base := `"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet","kubeconfig":"k","clusterNetwork":"cn"`
	tests := []struct {
		name string
		conf string
		n    int      // warnings expected
		want []string // substrings of them
	}{
		{name: "none", conf: `{` + base + `}`},
		{name: "Multus documented and thick-plugin keys", conf: `{` + base + `,"confDir":"/etc/cni/multus/net.d","cniDir":"/var/lib/cni/multus","binDir":"/opt/cni/bin",
			"logFile":"/var/log/multus.log","logLevel":"debug","logToStderr":true,
			"capabilities":{"portMappings":true},"namespaceIsolation":false,"globalNamespaces":"default","defaultNetworks":[],"systemNamespaces":["kube-system"],
			"multusNamespace":"kube-system","readinessindicatorfile":"","retryDeleteOnError":false}`},
		{name: "Multus keys rdmanet does not act on", conf: `{` + base + `,"logOptions":{"maxAge":5},"auxiliaryCNIChainName":"x","daemonSocketDir":"/run/multus"}`, n: 3,
			want: []string{`"logOptions" is accepted but has no effect`, `"auxiliaryCNIChainName" is accepted but has no effect`, `"daemonSocketDir" is accepted but has no effect`}},
		{name: "any case is the key (encoding/json reads it)", conf: `{` + base + `,"NamespaceIsolation":false,"clusternetwork":"x"}`},
		{name: "keys a runtime adds", conf: `{` + base + `,"runtimeConfig":{"portMappings":[]},"prevResult":{"cniVersion":"1.0.0"},"args":{"cni":{}}}`},
		{name: "rdmanet keys", conf: `{` + base + `,"podResourcesSocket":"s","deviceInfoDir":"d","daemonSocket":"x","delTimeout":"1s","apiTimeout":"1s","addTimeout":"1s","concurrentNetworks":true,"source":{"type":"kubernetes"}}`},
		{name: "snake case", conf: `{` + base + `,"namespace_isolation":true}`, n: 1, want: []string{`unknown key "namespace_isolation"`, `did you mean "namespaceIsolation"`}},
		{name: "near miss", conf: `{` + base + `,"clusterNetwrok":"x"}`, n: 1, want: []string{`"clusterNetwrok"`, `did you mean "clusterNetwork"`}},
		{name: "far off", conf: `{` + base + `,"frobnicate":1}`, n: 1, want: []string{`unknown key "frobnicate" is ignored`}},
		{name: "inside source", conf: `{` + base + `,"source":{"type":"static","dir":"d","status_dir":"s"}}`, n: 1, want: []string{`"source.status_dir"`, `did you mean "source.statusDir"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.conf))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Warnings) != tc.n {
				t.Fatalf("warnings %q, want %d", c.Warnings, tc.n)
			}
			for _, w := range tc.want {
				if !strings.Contains(strings.Join(c.Warnings, "\n"), w) {
					t.Errorf("warnings %q lack %q", c.Warnings, w)
				}
			}
		})
	}
}

// TestNamespaceIsolationDefault: isolation is on unless the config turns it
// off, and without globalNamespaces the "default" namespace is the global
// one, as Multus implies (defect 10).
func TestNamespaceIsolationDefault(t *testing.T) {
	base := `"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet","kubeconfig":"k","clusterNetwork":"cn"`
	tests := []struct {
		name      string
		extra     string
		isolation bool
		global    []string
	}{
		{name: "unset: on, default namespace global", isolation: true, global: []string{"default"}},
		{name: "explicit false", extra: `,"namespaceIsolation":false`, isolation: false, global: []string{"default"}},
		{name: "explicit true with globals", extra: `,"namespaceIsolation":true,"globalNamespaces":"shared, kube-system"`, isolation: true, global: []string{"shared", "kube-system"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(`{` + base + tc.extra + `}`))
			if err != nil {
				t.Fatal(err)
			}
			if c.NamespaceIsolation != tc.isolation || !reflect.DeepEqual(c.GlobalNamespaces, tc.global) {
				t.Fatalf("isolation %v globals %v, want %v %v", c.NamespaceIsolation, c.GlobalNamespaces, tc.isolation, tc.global)
			}
		})
	}
}

// TestParseDelConfig: DEL gets a usable config whatever is wrong with the
// rest of it (defect 2).
func TestParseDelConfig(t *testing.T) {
	tests := []struct {
		name    string
		conf    string
		cniDir  string
		timeout time.Duration
		warns   bool
	}{
		{name: "valid", conf: `{"cniVersion":"1.0.0","name":"r","type":"rdmanet","kubeconfig":"k","clusterNetwork":"a","cniDir":"/c","delTimeout":"3s"}`, cniDir: "/c", timeout: 3 * time.Second},
		{name: "no kubeconfig", conf: `{"cniVersion":"1.0.0","name":"r","type":"rdmanet","clusterNetwork":"a","cniDir":"/c"}`, cniDir: "/c", timeout: DefaultDelTimeout, warns: true},
		{name: "no default network", conf: `{"cniVersion":"1.0.0","name":"r","type":"rdmanet","cniDir":"/c","delTimeout":"2s"}`, cniDir: "/c", timeout: 2 * time.Second, warns: true},
		{name: "unknown source, bad log level", conf: `{"cniVersion":"1.0.0","name":"r","type":"rdmanet","source":{"type":"etcd"},"logLevel":"loud"}`, cniDir: DefaultCNIDir, timeout: DefaultDelTimeout, warns: true},
		{name: "field of the wrong type", conf: `{"cniVersion":"1.0.0","name":"r","type":"rdmanet","cniDir":"/c","namespaceIsolation":"yes","delTimeout":"soon"}`, cniDir: "/c", timeout: DefaultDelTimeout, warns: true},
		{name: "not JSON", conf: `{`, cniDir: DefaultCNIDir, timeout: DefaultDelTimeout, warns: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ParseDelConfig([]byte(tc.conf))
			if c.CNIDir != tc.cniDir || c.DelTimeoutDur != tc.timeout || c.BinDir == "" {
				t.Fatalf("cniDir %q delTimeout %s binDir %q, want %q %s", c.CNIDir, c.DelTimeoutDur, c.BinDir, tc.cniDir, tc.timeout)
			}
			if (len(c.Warnings) > 0) != tc.warns {
				t.Fatalf("warnings %q, want some: %v", c.Warnings, tc.warns)
			}
		})
	}
}

func TestParseConfigDefaultNetworks(t *testing.T) {
	c, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"r","type":"rdmanet","kubeconfig":"k","clusterNetwork":"a","defaultNetworks":["side"],"addTimeout":"45s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.DefaultNetworks, []string{"side"}) || !reflect.DeepEqual(c.SystemNamespaces, []string{"kube-system"}) || c.AddTimeoutDur != 45*time.Second {
		t.Fatalf("parsed %+v", c)
	}
	if _, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"r","type":"rdmanet","kubeconfig":"k","clusterNetwork":"a","defaultNetworks":[" "]}`)); err == nil || !strings.Contains(err.Error(), "defaultNetworks[0]") {
		t.Fatalf("empty defaultNetworks entry: err = %v", err)
	}
}
