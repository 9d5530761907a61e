package lint

import (
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
)

// TestPoolConfigJudgedByTheAgentsParser: lint reads pool configs with
// config.ParseFile, the agent's parser: its warnings are RDMA003 warnings
// naming key and pool, its refusals RDMA003 errors with its message, so
// lint and the agent never disagree.
func TestPoolConfigJudgedByTheAgentsParser(t *testing.T) {
	liberal := `{"resourceList":[
	  {"resourcePrefix":"example.com","resourceName":"sriov_rdma","selectors":{"vendors":["15b3"],"pfNames":["enp65s0f0np0"],"IsRdma":true},"futureKey":1},
	  {"resourceName":"qat","deviceType":"accelerator","selectors":{"vendors":["8086"]}}]}`
	refused := `{"resourceList":[{"resourceName":"bad.name","selectors":{"vendors":["15b3"]}}]}`
	cm := func(cfg string) M {
		return M{"apiVersion": "v1", "kind": "ConfigMap", "metadata": M{"name": "sriovdp-config", "namespace": "kube-system"}, "data": M{"config.json": cfg}}
	}
	_, agentErr := config.ParseFile("ConfigMap/kube-system/sriovdp-config data[config.json]", []byte(refused))
	if agentErr == nil {
		t.Fatal("the agent's parser takes the refused config")
	}
	tests := []struct {
		name     string
		cfg      string
		severity Severity
		field    string
		message  []string
	}{
		{name: "key in another case", cfg: liberal, severity: Warning, field: "data[config.json].resourceList[0].selectors.IsRdma", message: []string{"(example.com/sriov_rdma)", `read as "isRdma"`}},
		{name: "unknown key", cfg: liberal, severity: Warning, field: "data[config.json].resourceList[0].futureKey", message: []string{"(example.com/sriov_rdma)", "futureKey"}},
		{name: "accelerator pool skipped", cfg: liberal, severity: Warning, field: "data[config.json].resourceList[1].deviceType", message: []string{"(intel.com/qat)", "pool skipped"}},
		{name: "refusal carries the agent's message", cfg: refused, severity: Error, field: "data[config.json]", message: []string{agentErr.Error()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := lintDocs(t, []M{cm(tc.cfg)})
			var seen []string
			for _, f := range res.Findings {
				if f.Rule != "RDMA003" {
					continue
				}
				seen = append(seen, string(f.Severity)+" "+f.Field+": "+f.Message)
				ok := f.Severity == tc.severity && f.Field == tc.field
				for _, m := range tc.message {
					ok = ok && strings.Contains(f.Message, m)
				}
				if ok {
					return
				}
			}
			t.Fatalf("no RDMA003 %s at %s with %q; RDMA003 findings:\n%s", tc.severity, tc.field, tc.message, strings.Join(seen, "\n"))
		})
	}
}
