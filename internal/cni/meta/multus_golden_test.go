package meta

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseNetworksAsMultus holds the meta-CNI's annotation parser to what
// Multus v4.2.3's own parser answers on the corpus of
// test/upstreamconfigs, which records those answers in
// testdata/multus-networks.json (regenerated there with -update; Multus
// cannot be imported here, its kubelet API is older than ours). Entries
// with "differ" or "metaDiffer" are cases Multus takes and fails on later;
// the meta-CNI refuses them at once.
func TestParseNetworksAsMultus(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "multus-networks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus []struct {
		Name       string `json:"name"`
		Value      string `json:"value"`
		Differ     string `json:"differ"`
		MetaDiffer string `json:"metaDiffer"`
		Multus     struct {
			OK       bool     `json:"ok"`
			Networks []string `json:"networks"`
		} `json:"multus"`
	}
	if err := json.Unmarshal(b, &corpus); err != nil {
		t.Fatal(err)
	}
	if len(corpus) < 30 {
		t.Fatalf("corpus has %d entries", len(corpus))
	}
	for _, c := range corpus {
		t.Run(c.Name, func(t *testing.T) {
			sels, err := ParseNetworks(c.Value, "ns1", "ns1/trainer-0")
			differ := c.Differ + c.MetaDiffer
			if differ != "" {
				if err == nil {
					t.Fatalf("Multus takes it and fails later (%s); the meta-CNI must refuse it now", differ)
				}
				return
			}
			if c.Multus.OK != (err == nil) {
				t.Fatalf("Multus ok=%v; meta-CNI err = %v", c.Multus.OK, err)
			}
			if err != nil {
				return
			}
			if len(sels) != len(c.Multus.Networks) {
				t.Fatalf("meta-CNI reads %d networks, Multus %v", len(sels), c.Multus.Networks)
			}
			for i, want := range c.Multus.Networks {
				key, ifname, _ := strings.Cut(want, "@")
				if sels[i].Key() != key || (ifname != "" && sels[i].Interface != ifname) {
					t.Errorf("network %d: meta-CNI %s@%s, Multus %s", i, sels[i].Key(), sels[i].Interface, want)
				}
			}
		})
	}
}
