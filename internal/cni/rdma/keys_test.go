package rdma

import (
	"testing"

	"github.com/rdmanet/rdmanet/internal/cni/conftest"
)

// TestUnknownKeys (issue 13, defect 11): the upstream RDMA CNI schema is
// accepted, anything else is reported.
func TestUnknownKeys(t *testing.T) {
	conftest.UnknownKeys(t, UnknownKeys, []conftest.KeysCase{
		{Name: "seed NAD", Conf: `{"cniVersion":"0.3.1","name":"face-training-rdma","type":"rdma"}`},
		{Name: "upstream keys", Conf: `{"cniVersion":"0.3.1","name":"n","type":"rdma","deviceID":"0000:41:00.2","args":{"cni":{"debug":true}},"runtimeConfig":{"deviceID":"x"},"prevResult":{}}`},
		{Name: "a key of the sriov step", Conf: `{"type":"rdma","vlan":200}`, Want: []string{`rdma config: unknown key "vlan" is ignored`}},
		{Name: "pciBusID", Conf: `{"type":"rdma","pciBusID":"0000:41:00.2"}`, Want: []string{`unknown key "pciBusID" is ignored (did you mean "deviceID"?)`}},
		{Name: "NetConf's own keys", Conf: `{"deviceID":"x","args":{},"type":"rdma"}`},
	})
}
