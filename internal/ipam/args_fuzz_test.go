package ipam

import (
	"strings"
	"testing"
)

// FuzzOwnerFromArgs: CNI_ARGS as any caller writes it never panics, and the
// pod keys it finds are the last of their values between ';' separators.
func FuzzOwnerFromArgs(f *testing.F) {
	for _, s := range []string{
		"IgnoreUnknown=1;K8S_POD_NAMESPACE=ai-training;K8S_POD_NAME=face-trainer-0;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u-1",
		"", ";;", "=", "K8S_POD_NAME", "K8S_POD_NAME=a=b", "K8S_POD_NAME=a;K8S_POD_NAME=b", "K8S_POD_UID=\x00",
	} {
		f.Add("c1", "net1", s)
	}
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, containerID, ifName, args string) {
		o, err := OwnerFromArgs(containerID, ifName, args)
		if err != nil {
			if containerID != "" && ifName != "" {
				t.Fatalf("refused %q %q: %v", containerID, ifName, err)
			}
			return
		}
		if o.ContainerID != containerID || o.IfName != ifName {
			t.Fatalf("owner %+v for %q %q", o, containerID, ifName)
		}
		for _, v := range []string{o.PodNamespace, o.PodName, o.PodUID} {
			if strings.Contains(v, ";") {
				t.Fatalf("value %q spans a ';' of %q", v, args)
			}
		}
	})
}
