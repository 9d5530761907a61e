package sriov

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
	"github.com/rdmanet/rdmanet/internal/cni/conftest"
)

// TestUnknownKeys (issue 13, defect 11): a misspelled key is reported with
// the key meant, every upstream SR-IOV CNI key is accepted.
func TestUnknownKeys(t *testing.T) {
	conftest.UnknownKeys(t, UnknownKeys, []conftest.KeysCase{
		{Name: "seed NAD", Conf: `{"cniVersion":"0.3.1","name":"face-training-rdma","type":"sriov","vlan":200,"spoofchk":"on","trust":"off","ipam":{"type":"whereabouts","range":"10.60.0.0/16"},"deviceID":"0000:41:00.2"}`},
		{Name: "operator-rendered NAD", Conf: `{"cniVersion":"1.0.0","name":"n","type":"sriov","vlan":0,"vlanQoS":0,"logLevel":"info","logFile":"/var/log/sriov-cni.log","ipam":{},"spoofchk":"on","trust":"off","link_state":"auto","min_tx_rate":0,"max_tx_rate":0,"capabilities":{"mac":true}}`},
		{Name: "vlan_id", Conf: `{"type":"sriov","vlan_id":200}`, Want: []string{`sriov config: unknown key "vlan_id" is ignored (did you mean "vlan"?)`}},
		{Name: "two mistakes", Conf: `{"type":"sriov","vlanQos":3,"spoof_chk":"on","linkstate":"auto"}`,
			Want: []string{`unknown key "linkstate" is ignored (did you mean "link_state"?)`, `unknown key "spoof_chk" is ignored (did you mean "spoofchk"?)`}},
		{Name: "not an object", Conf: `[]`},
	})
}

// TestNetConfKeysCatalogued: every key NetConf decodes is in the catalogue
// the warnings come from, so a key the plugin reads is never called unknown.
func TestNetConfKeysCatalogued(t *testing.T) {
	var keys []string
	collect := func(typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Anonymous {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			keys = append(keys, name)
		}
	}
	collect(reflect.TypeOf(NetConf{}))
	collect(reflect.TypeOf(NetConf{}.NetConf))
	if f := confkeys.SRIOV.Check(keys); len(f) != 0 {
		t.Fatalf("NetConf keys missing from confkeys.SRIOV: %v", f)
	}
}
