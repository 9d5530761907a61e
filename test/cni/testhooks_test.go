package cni_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

// prodDir is a production build (no tags, as shipped) of sriov and rdma.
var (
	prodOnce sync.Once
	prodDir  string
	prodErr  error
)

func prodBin(t testing.TB) string {
	t.Helper()
	prodOnce.Do(func() {
		prodDir = filepath.Join(binDir, "production")
		prodErr = pluginbin.BuildWith(prodDir, pluginbin.Options{}, pluginbin.SRIOV, pluginbin.RDMA)
	})
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	return prodDir
}

// TestTestSwitchesNeedTheTag execs the plugin binaries as a runtime does
// (environment + stdin, in the node's host netns) with the test switches
// set: a production build refuses RDMANET_NETOPS=record for ADD before
// touching anything, runs DEL against the kernel, and ignores
// RDMANET_CNI_FAULT, saying so on stderr (the CNI log); the
// -tags rdmanet_testhooks build (binDir) honours both.
func TestTestSwitchesNeedTheTag(t *testing.T) {
	const i = 0
	sriovConf := func(n *node) string {
		return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"t","type":"sriov","deviceID":%q,"vlan":200}`, vfBDF(i))
	}
	rdmaConf := func(n *node) string {
		return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"t","type":"rdma","deviceID":%q}`, vfBDF(i))
	}
	tests := []struct {
		name       string
		prod       bool
		plugin     string
		cmd        string
		conf       func(*node) string
		env        []string // on top of the node's (RDMANET_NETOPS=record ...)
		wantErr    string   // "" = success
		notErr     string   // the error must not contain this
		wantStderr string
		wantOps    bool // the recorder logged operations
	}{
		{name: "production sriov refuses record for ADD", prod: true, plugin: "sriov", cmd: "ADD", conf: sriovConf,
			wantErr: "RDMANET_NETOPS=record: test switch in a production build: this binary was built without -tags rdmanet_testhooks"},
		{name: "production rdma refuses record for ADD", prod: true, plugin: "rdma", cmd: "ADD", conf: rdmaConf,
			wantErr: "RDMANET_NETOPS=record: test switch in a production build"},
		{name: "production sriov refuses record for CHECK", prod: true, plugin: "sriov", cmd: "CHECK", conf: sriovConf,
			wantErr: "test switch in a production build"},
		{name: "production sriov DEL runs against the kernel", prod: true, plugin: "sriov", cmd: "DEL", conf: sriovConf,
			wantStderr: "RDMANET_NETOPS=record ignored for DEL"},
		{name: "production rdma DEL runs against the kernel", prod: true, plugin: "rdma", cmd: "DEL", conf: rdmaConf,
			wantStderr: "RDMANET_NETOPS=record ignored for DEL"},
		{name: "production sriov ignores a failpoint", prod: true, plugin: "sriov", cmd: "ADD", conf: sriovConf,
			env:        []string{netops.EnvImpl + "=", netops.EnvFault + "=sriov:cache"},
			wantErr:    "link not found", // fails at the kernel (the fixture PF has no netdev here), not at the failpoint
			notErr:     "injected fault",
			wantStderr: `RDMANET_CNI_FAULT="sriov:cache" ignored: failpoints are a test switch and this is a production build`},
		{name: "tagged sriov honours record", plugin: "sriov", cmd: "ADD", conf: sriovConf, wantOps: true},
		{name: "tagged sriov honours a failpoint", plugin: "sriov", cmd: "ADD", conf: sriovConf,
			env: []string{netops.EnvFault + "=sriov:vf-config"}, wantErr: `injected fault after step "vf-config" (RDMANET_CNI_FAULT)`, wantOps: true},
		{name: "tagged rdma honours a failpoint", plugin: "rdma", cmd: "ADD", conf: func(n *node) string {
			return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"t","type":"rdma","deviceID":%q,"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/x"}]}}`, vfBDF(i))
		}, env: []string{netops.EnvFault + "=rdma:cache"}, wantErr: `injected fault after step "cache" (RDMANET_CNI_FAULT)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := binDir
			if tc.prod {
				dir = prodBin(t)
			}
			n := newNode(t, 1)
			pod := netnsutil.NewNS(t)
			from := n.logLen(t)
			env := append(os.Environ(), "CNI_COMMAND="+tc.cmd, "CNI_CONTAINERID="+containerID(i), "CNI_NETNS="+pod.Path(),
				"CNI_IFNAME=net1", "CNI_PATH="+dir)
			env = append(env, tc.env...)
			out, stderr, err := n.execPlugin(filepath.Join(dir, tc.plugin), tc.conf(n), env)
			t.Logf("stdout: %s\nstderr: %s", out, stderr)
			var ee *exec.ExitError
			switch {
			case err != nil && !errors.As(err, &ee):
				t.Fatal(err)
			case err != nil && ee.ExitCode() != 1:
				t.Fatalf("%s %s exited %d (died?), want a CNI error (exit 1) or success", tc.plugin, tc.cmd, ee.ExitCode())
			case tc.wantErr == "" && err != nil:
				t.Fatalf("%s %s failed: %s", tc.plugin, tc.cmd, out)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("%s %s succeeded, want an error containing %q", tc.plugin, tc.cmd, tc.wantErr)
			}
			if err != nil {
				var te types.Error
				if jerr := json.Unmarshal(out, &te); jerr != nil || te.Msg == "" {
					t.Fatalf("stdout %q is not a CNI error: %v", out, jerr)
				}
				if !strings.Contains(te.Msg, tc.wantErr) {
					t.Fatalf("error %q, want it to contain %q", te.Msg, tc.wantErr)
				}
				if tc.notErr != "" && strings.Contains(te.Msg, tc.notErr) {
					t.Fatalf("error %q contains %q", te.Msg, tc.notErr)
				}
			}
			if !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("stderr %q does not say %q", stderr, tc.wantStderr)
			}
			log, lerr := n.rec.Log()
			if lerr != nil {
				t.Fatal(lerr)
			}
			if (len(log) > from) != tc.wantOps {
				t.Errorf("recorder log %q, want operations: %v", log[from:], tc.wantOps)
			}
			if tc.wantOps && err == nil {
				if out, _, err := n.execPlugin(filepath.Join(dir, tc.plugin), tc.conf(n), append(env, "CNI_COMMAND=DEL")); err != nil {
					t.Fatalf("DEL: %v: %s", err, out)
				}
			}
			n.assertRestored(t, i, containerID(i))
		})
	}
}

// execPlugin runs a plugin binary as a runtime does (environment, config on
// stdin) from the node's host netns and returns its stdout and stderr
// (libcni drops a failing plugin's stderr, which is what these tests read).
func (n *node) execPlugin(path, stdin string, env []string) (stdout []byte, stderr string, err error) {
	var o, e bytes.Buffer
	_ = n.inHost(func() error {
		cmd := exec.Command(path)
		cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, strings.NewReader(stdin), &o, &e
		err = cmd.Run()
		return nil
	})
	return o.Bytes(), e.String(), err
}
