package controller

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConfiguredPoolsWarnings: the labeler reads the agent ConfigMap with
// the agent's parser: a key in another case (IsRdma), an unknown key and an
// accelerator pool load, the served pools are labelled, and each warning
// is logged once per ConfigMap version, naming key and pool.
func TestConfiguredPoolsWarnings(t *testing.T) {
	data := map[string]string{"config.json": `{"resourceList":[
	  {"resourcePrefix":"example.com","resourceName":"sriov_rdma","selectors":{"vendors":["15b3"],"IsRdma":true},"futureKey":1},
	  {"resourceName":"qat","deviceType":"accelerator","selectors":{"vendors":["8086"]}}]}`}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "rdmanet-system", Name: AgentConfigMap, UID: "u1", ResourceVersion: "7"}, Data: data}
	pools, warnings, err := configuredPools(cm)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pools, ",") != "example.com/sriov_rdma" {
		t.Fatalf("pools = %v, want only example.com/sriov_rdma", pools)
	}
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	r := &NodeLabeler{}
	r.logWarnings(logger, cm, warnings)
	r.logWarnings(logger, cm, warnings) // another node, same config
	tests := []struct {
		name string
		want []string
	}{
		{name: "key in another case", want: []string{`selectors.IsRdma: read as \"isRdma\"`, `"file"="config.json"`, `"pool"="example.com/sriov_rdma"`}},
		{name: "unknown key", want: []string{"futureKey", `"pool"="example.com/sriov_rdma"`}},
		{name: "accelerator pool skipped", want: []string{"pool skipped", `"pool"="intel.com/qat"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for _, l := range lines {
				all := true
				for _, w := range tc.want {
					all = all && strings.Contains(l, w)
				}
				if all {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d log lines have %q, want 1; lines:\n%s", n, tc.want, strings.Join(lines, "\n"))
			}
		})
	}
	before := len(lines)
	cm2 := cm.DeepCopy()
	cm2.ResourceVersion = "8"
	r.logWarnings(logger, cm2, warnings)
	if len(lines) != 2*before {
		t.Errorf("a new ConfigMap version logged %d lines, want the %d warnings again", len(lines)-before, before)
	}
}
