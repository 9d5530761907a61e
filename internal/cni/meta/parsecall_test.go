package meta_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/cni/meta/direct"
	"github.com/rdmanet/rdmanet/internal/daemon"
	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

// failedAttaches is an EventRecorder that keeps the pods it is given.
type failedAttaches struct {
	mu   sync.Mutex
	pods []meta.PodIdentity
}

func (f *failedAttaches) AttachFailed(pod meta.PodIdentity, _ string, _ error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = append(f.pods, pod)
}

// TestCNIArgsParsedOnce: a call's CNI_ARGS are parsed once, where the call
// enters (the daemon's socket handler, rdmanet-direct), and the plugin, the
// log and the Events recorder take the pod from the Call: ADD, CHECK and DEL,
// each succeeding and failing, parse exactly once. Before meta.ParseCall a
// successful ADD parsed twice (checkCall, Add), a failed one through the
// daemon three times (again for its Event), and DEL and CHECK never.
func TestCNIArgsParsedOnce(t *testing.T) {
	bin, err := pluginbin.TempDir("rdmanet-meta-parse-", testPluginImport)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.MkdirAll(manifests, 0o700); err != nil {
		t.Fatal(err)
	}
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p0\n  namespace: ai\n  uid: uid-0\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
	if err := os.WriteFile(filepath.Join(manifests, "p0.yaml"), []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	def := filepath.Join(dir, "default.conflist")
	if err := os.WriteFile(def, []byte(`{"cniVersion":"1.0.0","name":"cluster","plugins":[{"type":"testplugin"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	conf, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "rdmanet", "type": "rdmanet", "clusterNetwork": def,
		"cniDir": filepath.Join(dir, "cni"), "binDir": bin, "logFile": filepath.Join(dir, "rdmanet.log"),
		"source": map[string]any{"type": "static", "dir": manifests, "statusDir": filepath.Join(dir, "status")}})
	if err != nil {
		t.Fatal(err)
	}
	sandbox := netnsutil.NewNS(t) // a sandbox: the delegate refuses its own netns
	events := &failedAttaches{}
	d := &daemon.MetaServer{Source: &meta.StaticSource{Dir: manifests, StatusDir: filepath.Join(dir, "status")}, Events: events, Log: discardLog()}
	entries := []struct {
		name string
		call func(verb string, a meta.Args) error
	}{
		{name: "daemon", call: func(verb string, a meta.Args) error {
			_, err := d.Call(context.Background(), daemonclient.Request{Version: daemonclient.Version, Command: verb, ContainerID: a.ContainerID,
				Netns: a.Netns, IfName: a.IfName, Args: a.Args, Path: a.Path, Config: conf})
			return err
		}},
		{name: "rdmanet-direct", call: func(verb string, a meta.Args) error {
			args := &skel.CmdArgs{ContainerID: a.ContainerID, Netns: a.Netns, IfName: a.IfName, Args: a.Args, Path: a.Path, StdinData: conf}
			f := direct.Funcs()
			switch verb {
			case "ADD":
				return f.Add(args)
			case "DEL":
				return f.Del(args)
			case "CHECK":
				return f.Check(args)
			}
			t.Fatalf("verb %s", verb)
			return nil
		}},
	}
	const podArgs = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ai;K8S_POD_NAME=p0;K8S_POD_UID=uid-0;K8S_POD_INFRA_CONTAINER_ID=c0"
	tests := []struct {
		name, verb, container, args string
		wantErr                     bool
	}{
		// in this order: CHECK and DEL find the container the ADD added
		{name: "ADD succeeds", verb: "ADD", container: "c-", args: podArgs},
		{name: "CHECK succeeds", verb: "CHECK", container: "c-", args: podArgs},
		{name: "DEL succeeds", verb: "DEL", container: "c-", args: podArgs},
		{name: "ADD fails: the pod is gone", verb: "ADD", container: "g-", args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=ai;K8S_POD_NAME=gone;K8S_POD_UID=uid-9", wantErr: true},
		{name: "ADD fails: CNI_ARGS do not parse", verb: "ADD", container: "b-", args: "K8S_POD_NAME", wantErr: true},
		{name: "CHECK fails: nothing was added", verb: "CHECK", container: "n-", args: podArgs, wantErr: true},
		{name: "DEL fails: the container ID leaves the cache dir", verb: "DEL", container: "../", args: podArgs, wantErr: true},
	}
	for _, e := range entries {
		for _, tc := range tests {
			t.Run(e.name+"/"+tc.name, func(t *testing.T) {
				before := len(events.pods)
				parses := meta.CountCNIArgsParses(t)
				err := e.call(tc.verb, meta.Args{ContainerID: tc.container + e.name, Netns: sandbox.Path(), IfName: "eth0", Args: tc.args, Path: bin})
				if (err != nil) != tc.wantErr {
					t.Fatalf("%s: err = %v, want an error: %v", tc.verb, err, tc.wantErr)
				}
				if n := parses.Load(); n != 1 {
					t.Errorf("%s parsed CNI_ARGS %d times, want once (where the call entered)", tc.verb, n)
				}
				if e.name == "daemon" && tc.name == "ADD fails: the pod is gone" {
					if len(events.pods) != before+1 || events.pods[before] != (meta.PodIdentity{Namespace: "ai", Name: "gone", UID: "uid-9"}) {
						t.Errorf("Events got %v, want the failed ADD's pod ai/gone (uid-9) from its Call", events.pods[before:])
					}
				}
			})
		}
	}
}
