package agent

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

type staticProbe struct {
	links []string
	mode  string
	err   error
}

func (p staticProbe) DefaultRouteLinks() ([]string, error) { return p.links, nil }
func (p staticProbe) RDMANetnsMode() (string, error)       { return p.mode, p.err }

// The --once output is the operator's preview of a config; its JSON shape
// is a contract: {"pools":[{"resource","kind","devices":[{"id","pf","netdev","rdma","numa","health"}],"problems"}],"node":{"rdma_netns_mode"}}.
func TestOnceReportOnSeedConfigs(t *testing.T) {
	root := t.TempDir()
	if _, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{}); err != nil {
		t.Fatal(err)
	}
	specs, err := LoadConfig([]string{
		filepath.Join("..", "..", "examples", "agent", "sriovdp-config.yaml"),
		filepath.Join("..", "..", "examples", "agent", "nicclusterpolicy.yaml"),
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Discover(Options{SysfsRoot: root, Probe: staticProbe{links: []string{"eno1"}, mode: "exclusive"}}, specs)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := NewReport(snap).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Pools []struct {
			Resource   string `json:"resource"`
			Kind       string `json:"kind"`
			Advertised bool   `json:"advertised"`
			Devices    []struct {
				ID     string `json:"id"`
				PF     string `json:"pf"`
				Netdev string `json:"netdev"`
				RDMA   string `json:"rdma"`
				NUMA   *int   `json:"numa"`
				Health string `json:"health"`
			} `json:"devices"`
			Problems []string `json:"problems"`
		} `json:"pools"`
		Node map[string]any `json:"node"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(got.Pools) != 2 {
		t.Fatalf("pools = %d", len(got.Pools))
	}
	ex, sh := got.Pools[0], got.Pools[1]
	if ex.Resource != "example.com/sriov_rdma" || ex.Kind != "exclusive" || !ex.Advertised || len(ex.Devices) != 16 {
		t.Fatalf("exclusive pool = %+v", ex)
	}
	d := ex.Devices[0]
	if d.ID != "0000:41:00.2" || d.PF != "0000:41:00.0" || d.Netdev != "enp65s0f0v0" || d.RDMA != "mlx5_4" || d.NUMA == nil || *d.NUMA != 0 || d.Health != "Healthy" {
		t.Fatalf("device = %+v", d)
	}
	if sh.Resource != "rdma/rdma_shared_device_eth" || sh.Kind != "shared" || sh.Advertised || len(sh.Devices) != 63 || !strings.Contains(strings.Join(sh.Problems, ""), "rdma system set netns shared") {
		t.Fatalf("shared pool = %+v", sh)
	}
	if got.Node["rdma_netns_mode"] != "exclusive" || got.Node["rdma_netns_mode_source"] != "netlink" {
		t.Fatalf("node = %v", got.Node)
	}
	var text bytes.Buffer
	if err := NewReport(snap).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0000:03:00.0 (eno1) (never handed out)", "example.com/sriov_rdma (exclusive): 16 devices, 16 healthy", "[not advertised]"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}
