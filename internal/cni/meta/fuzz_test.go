package meta

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
)

// FuzzDaemonRequest feeds any bytes to the daemon's side of the shim
// protocol, up to the point where a call would touch the node: decode, the
// checks of the runtime's values, config parsing (ADD's and DEL's), and the
// CNI_ARGS handed to delegates. Never a panic; a call that passes the checks
// names only files inside the plugin's dirs.
func FuzzDaemonRequest(f *testing.F) {
	conf := `{"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet","clusterNetwork":"k8s-pod-network","cniDir":"/var/lib/cni/rdmanet",` +
		`"source":{"type":"static","dir":"/m"}}`
	for _, r := range []daemonclient.Request{
		{Version: daemonclient.Version, Command: "ADD", ContainerID: "c0ffee0001", Netns: "/var/run/netns/p", IfName: "eth0",
			Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=ai-training;K8S_POD_NAME=face-trainer-0;K8S_POD_INFRA_CONTAINER_ID=c0ffee0001;K8S_POD_UID=u1",
			Path: "/opt/cni/bin", Config: json.RawMessage(conf), TimeoutMs: 120000},
		{Version: daemonclient.Version, Command: "DEL", ContainerID: "../../etc/x", IfName: "eth0", Config: json.RawMessage(`{}`)},
		{Version: daemonclient.Version, Command: "CHECK", ContainerID: "c1", IfName: "../x", Config: json.RawMessage(conf)},
		{Version: daemonclient.Version, Command: "ADD", ContainerID: "c1", IfName: "eth0", Args: "K8S_POD_NAMESPACE=..;K8S_POD_NAME=a/b", Config: json.RawMessage(conf)},
		{Version: daemonclient.Version, Command: "GC", Config: json.RawMessage(`{"cniVersion":"1.1.0","cni.dev/valid-attachments":[]}`)},
		{Version: 0, Command: "STATUS"},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":1,"command":"ADD","containerID":"c\u0000","ifName":"eth0","args":"=;;=x;K8S_POD_NAME"}`))
	f.Add([]byte(`{"v":1,"command":"ADD","config":{"delegates":[{}],"clusterNetwork":"x","runtimeConfig":{"a":[1]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var req daemonclient.Request
		if err := daemonclient.Read(bytes.NewReader(b), &req); err != nil || req.Version != daemonclient.Version {
			return
		}
		conf := ParseDelConfig(req.Config)
		if c, err := ParseConfig(req.Config); err == nil {
			conf = c
		}
		a := Args{ContainerID: req.ContainerID, Netns: req.Netns, IfName: req.IfName, Args: req.Args, Path: req.Path}
		p := &Plugin{Conf: conf}
		_ = p.runtimeConf(a, &Delegate{IfName: req.IfName})
		c, err := ParseCall(req.Command, a)
		if err != nil {
			return
		}
		for _, path := range []string{p.cachePath(a.ContainerID), p.lockPath(a.ContainerID)} {
			if filepath.Dir(path) != filepath.Clean(p.cacheDir()) {
				t.Fatalf("container ID %q passed the checks but names %s, outside %s", a.ContainerID, path, p.cacheDir())
			}
		}
		if req.Command == "ADD" {
			if _, err := ParsePodArgs(a.Args); err != nil {
				t.Fatalf("ParseCall passed ADD but ParsePodArgs refuses: %v", err)
			}
		}
		if c.HasPod {
			s := &StaticSource{StatusDir: "/status"}
			if got := s.StatusPath(c.Pod.Namespace, c.Pod.Name); filepath.Dir(got) != "/status" || strings.Contains(got, "..") {
				t.Fatalf("pod %s/%s passed the checks but names %s", c.Pod.Namespace, c.Pod.Name, got)
			}
		}
	})
}

// FuzzParsePodArgs: CNI_ARGS as kubelet or anything else writes it.
func FuzzParsePodArgs(f *testing.F) {
	for _, s := range []string{
		"IgnoreUnknown=1;K8S_POD_NAMESPACE=ai-training;K8S_POD_NAME=face-trainer-0;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u-1",
		"", ";", "=", "K8S_POD_NAME", "K8S_POD_NAME=a=b", "IgnoreUnknown=true;X=1", "IgnoreUnknown=maybe;X=1",
		"K8S_POD_NAMESPACE=..;K8S_POD_NAME=../../etc", "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=a\x00b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		pa, err := ParsePodArgs(args)
		if err != nil {
			return
		}
		for _, v := range []string{pa.Namespace, pa.Name} {
			if strings.ContainsAny(v, "/\x00") || v == "." || v == ".." {
				t.Fatalf("accepted %q from %q", v, args)
			}
		}
	})
}
