package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/doctor"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// doctorHost writes the bundled node plus procfs and /dev fixtures.
func doctorHost(t *testing.T) (root string, node *sysfsfixture.Standard) {
	t.Helper()
	root = t.TempDir()
	std, err := sysfsfixture.NewStandard(filepath.Join(root, "sys"), sysfsfixture.StandardOptions{})
	if err == nil {
		// what a subnet manager gives the node's InfiniBand port (LID, SM
		// LID, the default partition), as on a working fabric
		err = std.SetIBPort(std.IB.RDMADev, sysfsfixture.IBPort{LID: 0x21, SMLID: 1})
	}
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"proc/self/limits":      "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         unlimited            unlimited            bytes     \n",
		"proc/self/status":      "Name:\tpython\nCapEff:\t00000000a80465fb\n",
		"proc/self/net/route":   "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\neno1\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
		"pod.env":               "# kubectl exec … -- env\nNCCL_IB_HCA=mlx5_1\nNCCL_SOCKET_IFNAME=eth9\nHOSTNAME=face-trainer-0\n",
		"other/bin/whereabouts": "#!/bin/sh\n# another project's whereabouts\n",
	}
	for i := 0; i < 28; i++ {
		files["dev/infiniband/uverbs"+strconv.Itoa(i)] = ""
	}
	for p, c := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, std
}

// runDoctor runs `doctor args...` with a kernel that reports the netns mode
// and the given process environment, and maps errors to exit codes as run does.
func runDoctor(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	s := streams{in: strings.NewReader(""), out: &out, err: &errb}
	cmd := newDoctorCmdWith(s, doctorDeps{
		netnsMode: func() (string, error) { return "exclusive", nil },
		environ:   func() []string { return environ },
	})
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	code := execute(cmd, args, &errb)
	return code, out.String(), errb.String()
}

func TestDoctorCLI(t *testing.T) {
	root, std := doctorHost(t)
	paths := []string{"--sysfs-root", root + "/sys", "--proc-root", root + "/proc", "--dev-root", root + "/dev", "--cni-bin-dir", root + "/opt/cni/bin"}
	hostEnv := []string{"NCCL_IB_HCA==mlx5_1", "NCCL_SOCKET_IFNAME=enp65s0f0np0", "NCCL_IB_GID_INDEX=3", "HOME=/root"}
	for _, tc := range []struct {
		name    string
		environ []string
		args    []string
		code    int
		stdout  []string
		stderr  string
	}{
		{name: "consistent host-mode node passes", environ: hostEnv, code: 0, stdout: []string{
			"rdma netns mode exclusive (kernel)  env process",
			"mlx5_1 port 1 ==> enp65s0f0np0 (Up)",
			"mlx5_1  1     3      0000:0000:0000:0000:0000:ffff:0a00:0164  10.0.1.100     v2   enp65s0f0np0",
			"\nNCCL\n", "  PASS  nccl-gid-index ",
			"PASS  ib-port             mlx5_3 port 1 (ibp193s0f0): LID 0x21, SM LID 0x1", "PASS: 30 pass, 0 warn, 0 fail",
		}},
		{name: "process env without NCCL_IB_HCA warns about the default route", environ: []string{"PATH=/bin"}, code: 0, stdout: []string{"WARN  default-route", "RDMA device mlx5_0 NCCL will also use"}},
		{name: "wrong GID index fails", environ: hostEnv, args: []string{"--env", "NCCL_IB_GID_INDEX=0"}, code: 1, stdout: []string{"FAIL  nccl-gid-index", "fix: NCCL_IB_GID_INDEX=3"}},
		{name: "pod env file", environ: hostEnv, args: []string{"--env-file", root + "/pod.env"}, code: 1, stdout: []string{"env " + root + "/pod.env", "NCCL_SOCKET_IFNAME=eth9 selects no interface here"}},
		{name: "env file and --env", args: []string{"--env-file", root + "/pod.env", "--env", "NCCL_SOCKET_IFNAME=enp65s0f0np0"}, code: 0, stdout: []string{"env " + root + "/pod.env + --env", "NCCL_SOCKET_IFNAME=enp65s0f0np0 selects"}},
		{name: "flag disagrees with kernel", environ: hostEnv, args: []string{"--rdma-netns-mode", "shared"}, code: 0, stdout: []string{"WARN  rdma-netns-mode", "disagrees"}},
		{name: "another project's whereabouts warns", environ: hostEnv, args: []string{"--cni-bin-dir", root + "/other/bin"}, code: 0, stdout: []string{"WARN  whereabouts", "/other/bin/whereabouts is not rdmanet's"}},
		{name: "VFs listed on request", environ: hostEnv, args: []string{"--vfs"}, code: 0, stdout: []string{"mlx5_27 port 1 ==> ibp193s0f0v7 (Up)"}},
		{name: "check catalogue", args: []string{"--checks"}, code: 0, stdout: []string{"rdma-devices", "nccl-gid-index", "ib-port", "ib-pkey"}},
		{name: "--pkey in the IB port's table", environ: hostEnv, args: []string{"--pkey", "0x7fff"}, code: 0, stdout: []string{"PASS  ib-pkey", "full member of PKey 0xffff"}},
		{name: "--pkey missing from the IB port's table fails (repeatable)", environ: hostEnv, args: []string{"--pkey", "0x8005", "--pkey", "8006"}, code: 1,
			stdout: []string{"FAIL  ib-pkey", "PKey 0x8005 is not in the port's table", "PKey 0x8006 is not in the port's table", "partitions.conf"}},
		{name: "bad --pkey", args: []string{"--pkey", "0x8000"}, code: 2, stderr: `--pkey "0x8000": want a PKey in hex`},
		{name: "missing sysfs root", args: []string{"--sysfs-root", root + "/nope"}, code: 2, stderr: "sysfs root"},
		{name: "bad output", args: []string{"-o", "yaml"}, code: 2, stderr: "want text or json"},
		{name: "bad netns mode", args: []string{"--rdma-netns-mode", "private"}, code: 2, stderr: "want exclusive or shared"},
		{name: "bad --env", args: []string{"--env", "NCCL_IB_HCA"}, code: 2, stderr: "want KEY=VALUE"},
		{name: "missing env file", args: []string{"--env-file", root + "/nope.env"}, code: 2, stderr: "nope.env"},
		{name: "positional argument", args: []string{"node-1"}, code: 2, stderr: "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.name != "missing sysfs root" {
				args = append(append([]string{}, paths...), args...)
			}
			code, out, errs := runDoctor(t, tc.environ, args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errs)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errs, tc.stderr) {
				t.Errorf("stderr %q lacks %q", errs, tc.stderr)
			}
			if strings.Contains(out, "\x1b[") {
				t.Error("colour escapes written to a non-terminal")
			}
		})
	}

	t.Run("port down fails with exit 1", func(t *testing.T) {
		if err := std.SetPortState("mlx5_1", "1: DOWN"); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = std.SetPortState("mlx5_1", "4: ACTIVE") }()
		code, out, _ := runDoctor(t, hostEnv, paths...)
		if code != 1 || !strings.Contains(out, "FAIL  port-state") || !strings.Contains(out, "mlx5_1 port 1 (enp65s0f0np0) is DOWN") {
			t.Errorf("exit %d\n%s", code, out)
		}
	})

	t.Run("json exact shape", func(t *testing.T) {
		code, out, _ := runDoctor(t, hostEnv, append(paths, "-o", "json", "--pkey", "0xffff")...)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &top); err != nil {
			t.Fatal(err)
		}
		if got := keysOf(top); got != "checks,node,summary" {
			t.Fatalf("top-level keys %s", got)
		}
		var checks []map[string]json.RawMessage
		if err := json.Unmarshal(top["checks"], &checks); err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, c := range checks {
			if got := keysOf(c); got != "fix,id,message,section,status" {
				t.Fatalf("check keys %s", got)
			}
			var id string
			_ = json.Unmarshal(c["id"], &id)
			ids[id] = true
		}
		for _, c := range doctor.Catalogue {
			if !ids[c.ID] {
				t.Errorf("check %s missing from the JSON report", c.ID)
			}
		}
		var sum map[string]json.RawMessage
		_ = json.Unmarshal(top["summary"], &sum)
		if got := keysOf(sum); got != "fail,pass,result,warn" {
			t.Errorf("summary keys %s", got)
		}
		var node map[string]json.RawMessage
		_ = json.Unmarshal(top["node"], &node)
		for _, k := range []string{"ibdev2netdev", "gids", "sriov", "rdma_netns_mode", "memlock", "cap_ipc_lock", "default_route_links", "nccl_env", "dev_infiniband"} {
			if _, ok := node[k]; !ok {
				t.Errorf("node lacks %q (has %s)", k, keysOf(node))
			}
		}
	})
}

func TestDoctorRegistered(t *testing.T) {
	root := newRootCmd(streams{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}})
	for _, c := range root.Commands() {
		if c.Name() == "doctor" {
			return
		}
	}
	t.Fatal("doctor is not registered")
}

func TestDoctorRunUsageErrors(t *testing.T) {
	// through run(): the real netlink dependency is never reached on bad usage
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "missing sysfs root", args: []string{"doctor", "--sysfs-root", filepath.Join(t.TempDir(), "nope")}, err: "sysfs root"},
		{name: "unknown flag", args: []string{"doctor", "--bogus"}, err: "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCmd(t, "", tc.args...)
			if code != exitInput || !strings.Contains(errs, tc.err) {
				t.Errorf("exit %d, stderr %q", code, errs)
			}
		})
	}
}
