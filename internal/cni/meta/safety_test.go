package meta

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// tree lists every path under root with its mode.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel+" "+fi.Mode().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestStaticStatusRefusesEscapingNames: the static source never writes a
// network-status file outside its dir, whatever the pod's names.
func TestStaticStatusRefusesEscapingNames(t *testing.T) {
	root := t.TempDir()
	manifests := filepath.Join(root, "manifests")
	if err := os.MkdirAll(manifests, 0o700); err != nil {
		t.Fatal(err)
	}
	// a manifest may name a pod anything: the source must still not escape
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"../../x","namespace":"ai-training"}}`
	if err := os.WriteFile(filepath.Join(manifests, "pod.json"), []byte(pod), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &StaticSource{Dir: manifests, StatusDir: filepath.Join(root, "s", "status")}
	before := tree(t, root)
	err := s.SetNetworkStatus(context.Background(), "ai-training", "../../x", "", nil)
	if err == nil || !strings.Contains(err.Error(), "pod name") || !strings.Contains(err.Error(), `"../../x"`) {
		t.Fatalf("error %v, want one naming the pod name", err)
	}
	if after := tree(t, root); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("tree changed:\nbefore %v\nafter  %v", before, after)
	}
}

func TestParsePodArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    podArgs
		wantErr string
	}{
		{name: "kubelet's", args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=ai-training;K8S_POD_NAME=trainer-0;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u-1",
			want: podArgs{Namespace: "ai-training", Name: "trainer-0", UID: "u-1", InfraContainerID: "c1"}},
		{name: "empty", args: ""},
		{name: "no pod", args: "IgnoreUnknown=1;FOO=bar"},
		{name: "unknown key without IgnoreUnknown", args: "FOO=bar", wantErr: "FOO"},
		{name: "not K=V", args: "K8S_POD_NAME", wantErr: "CNI_ARGS"},
		{name: "name without namespace", args: "K8S_POD_NAME=x", wantErr: "K8S_POD_NAMESPACE"},
		{name: "escaping name", args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=a/b", wantErr: "K8S_POD_NAME"},
		{name: "NUL in name", args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=a\x00b", wantErr: "NUL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePodArgs(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
