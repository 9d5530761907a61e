package ipam_test

import (
	"encoding/json"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/rdmanet/rdmanet/internal/ipam"
)

// TestPluginGatewayOutsideTheRange (issue 27): the Whereabouts README's IPv6
// config, whose gateway lies outside its /116, is served: the gateway is
// returned with the address of its family, as Whereabouts returns it, and
// not with the other family's.
func TestPluginGatewayOutsideTheRange(t *testing.T) {
	p, out := newTestPlugin(t, map[string]string{ipam.EnvStorePath: t.TempDir(), ipam.EnvStoreType: ipam.StoreLocal}, nil)
	conf := `{"cniVersion":"1.0.0","name":"whereaboutsexample","ipam":{"type":"whereabouts",
		"ipRanges":[{"range":"2001::0/116"},{"range":"10.60.0.0/24"}],"gateway":"2001::f:1"}}`
	args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: []byte(conf),
		Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u-1"}
	if err := p.Add(args); err != nil {
		t.Fatal(err)
	}
	var res current.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result %q: %v", out, err)
	}
	if ones, _ := res.IPs[0].Address.Mask.Size(); len(res.IPs) != 2 || ones != 116 || res.IPs[1].Address.IP.To4() == nil {
		t.Fatalf("want an address of 2001::/116 and one IPv4 address, got %s", out)
	}
	if gw := res.IPs[0].Gateway.String(); gw != "2001::f:1" {
		t.Errorf("IPv6 gateway %s, want 2001::f:1", gw)
	}
	if gw := res.IPs[1].Gateway; gw != nil {
		t.Errorf("IPv4 address has gateway %s, want none (the gateway is IPv6)", gw)
	}
}
