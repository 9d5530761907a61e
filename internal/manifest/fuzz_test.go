package manifest

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: the reader never panics, and whatever it accepts yields
// objects whose typed views (pod templates, NADs, pools) never panic either.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("../../examples/seeds/*/*.yaml")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"", "---\n", "--- {}\n", "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Pod}]\n",
		"[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"spec\":{\"containers\":[{\"name\":1}]}}]",
		"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nspec: {pytorchReplicaSpecs: {Worker: {template: 3}}}\n",
		"apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nspec: {tasks: [1, {template: {}}]}\n",
		"apiVersion: v1\nkind: ConfigMap\ndata: {config.json: '{\"resourceList\": [{\"selectors\": 5}]}'}\n",
		"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nspec: {config: '{\"plugins\": [null]}'}\n",
		"a: &a [*a]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		for _, o := range objs {
			_ = o.Ref()
			_, _ = PodTemplates(o)
			_ = NADFromObject(o)
			_, _ = PoolsFromObject(o)
			for k, v := range o.Annotations {
				_, _ = ParseNetworks(k, v)
			}
		}
	})
}
