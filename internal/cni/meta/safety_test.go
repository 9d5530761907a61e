package meta

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
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

// TestCallRefusesEscapingNames: values of the runtime that would put a file
// outside the plugin's directories are refused over the daemon socket (where
// skel's checks do not run) before anything is created or read; the error
// names the field, the value and the rule.
func TestCallRefusesEscapingNames(t *testing.T) {
	root := t.TempDir()
	cniDir := filepath.Join(root, "a", "b", "cni")
	manifests := filepath.Join(root, "manifests")
	if err := os.MkdirAll(manifests, 0o700); err != nil {
		t.Fatal(err)
	}
	conf, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "rdmanet", "type": "rdmanet", "clusterNetwork": "k8s-pod-network",
		"confDir": filepath.Join(root, "conf"), "cniDir": cniDir, "binDir": filepath.Join(root, "bin"),
		"source": map[string]any{"type": "static", "dir": manifests}})
	sock := startDaemon(t, &Daemon{Socket: filepath.Join(root, "run", "d.sock"), Source: &StaticSource{Dir: manifests, StatusDir: filepath.Join(cniDir, "status")},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	before := tree(t, root)

	podArgs := "IgnoreUnknown=1;K8S_POD_NAMESPACE=ai-training;K8S_POD_NAME=trainer-0"
	tests := []struct {
		name    string
		req     daemonclient.Request
		wantMsg []string
	}{
		{name: "ADD container id ../../etc/x", req: daemonclient.Request{Command: "ADD", ContainerID: "../../etc/x", IfName: "eth0", Args: podArgs},
			wantMsg: []string{"CNI_CONTAINERID", `"../../etc/x"`, "letters, digits"}},
		{name: "ADD absolute container id", req: daemonclient.Request{Command: "ADD", ContainerID: "/etc/passwd", IfName: "eth0", Args: podArgs},
			wantMsg: []string{"CNI_CONTAINERID", `"/etc/passwd"`}},
		{name: "ADD container id with NUL", req: daemonclient.Request{Command: "ADD", ContainerID: "c1\x00x", IfName: "eth0", Args: podArgs},
			wantMsg: []string{"CNI_CONTAINERID", "NUL"}},
		{name: "ADD over-long container id", req: daemonclient.Request{Command: "ADD", ContainerID: strings.Repeat("c", 4096), IfName: "eth0", Args: podArgs},
			wantMsg: []string{"CNI_CONTAINERID", "4096 bytes"}},
		{name: "ADD ifName ../x", req: daemonclient.Request{Command: "ADD", ContainerID: "c1", IfName: "../x", Args: podArgs},
			wantMsg: []string{"CNI_IFNAME", `"../x"`}},
		{name: "ADD ifName empty", req: daemonclient.Request{Command: "ADD", ContainerID: "c1", Args: podArgs},
			wantMsg: []string{"CNI_IFNAME", "empty"}},
		{name: "ADD pod name escaping", req: daemonclient.Request{Command: "ADD", ContainerID: "c1", IfName: "eth0", Args: "K8S_POD_NAMESPACE=ai-training;K8S_POD_NAME=../../../x"},
			wantMsg: []string{"K8S_POD_NAME", `"../../../x"`, "DNS-1123"}},
		{name: "ADD pod namespace escaping", req: daemonclient.Request{Command: "ADD", ContainerID: "c1", IfName: "eth0", Args: "K8S_POD_NAMESPACE=..;K8S_POD_NAME=x"},
			wantMsg: []string{"K8S_POD_NAMESPACE", `".."`}},
		{name: "DEL container id ../../etc/x", req: daemonclient.Request{Command: "DEL", ContainerID: "../../etc/x", IfName: "eth0"},
			wantMsg: []string{"CNI_CONTAINERID", `"../../etc/x"`}},
		{name: "DEL container id ..", req: daemonclient.Request{Command: "DEL", ContainerID: "..", IfName: "eth0"},
			wantMsg: []string{"CNI_CONTAINERID", `".."`}},
		{name: "CHECK container id ../x", req: daemonclient.Request{Command: "CHECK", ContainerID: "../x", IfName: "eth0"},
			wantMsg: []string{"CNI_CONTAINERID", `"../x"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Version, tc.req.Config = daemonclient.Version, conf
			var r daemonclient.Response
			if err := daemonclient.Exchange(sock, 2*time.Second, 10*time.Second, tc.req, &r); err != nil {
				t.Fatal(err)
			}
			if r.Error == nil {
				t.Fatalf("accepted; result %s", r.Result)
			}
			if r.Error.Code != types.ErrInvalidEnvironmentVariables {
				t.Errorf("code %d, want %d (%s)", r.Error.Code, types.ErrInvalidEnvironmentVariables, r.Error.Msg)
			}
			for _, w := range append(tc.wantMsg, "fix:", tc.req.Command) {
				if !strings.Contains(r.Error.Msg, w) {
					t.Errorf("message %q lacks %q", r.Error.Msg, w)
				}
			}
			if after := tree(t, root); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("the refused call changed the tree:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
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
			got, err := parsePodArgs(tc.args)
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
