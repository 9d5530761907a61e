package daemonclient

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecHelperProcess is the child of TestExec: it does what
// FORWARD_TEST_CHILD says and never returns when Exec works.
func TestExecHelperProcess(t *testing.T) {
	what := os.Getenv("FORWARD_TEST_CHILD")
	if what == "" {
		return // run by TestExec only
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB: more than a pipe holds
	var err error
	switch what {
	case "replaced": // the thin plugin read stdin, then falls back
		_, _ = os.Stdin.Read(make([]byte, 10))
		err = Exec("/bin/cat", nil, data)
	case "inherited": // no daemon: stdin untouched
		err = Exec("/bin/cat", nil, nil)
	case "closed":
		os.Stdin.Close()
		err = Exec("/bin/cat", nil, data)
	case "direct":
		Direct("x", "x-direct", []byte("config"))
	case "missing":
		Direct("x", "x-missing-direct", nil)
	}
	t.Fatalf("returned: %v", err)
}

// TestExec: the process is replaced by the -direct binary with the
// arguments, environment and the config as stdin, whatever the thin
// plugin had done with its own stdin; a missing one is a CNI error.
func TestExec(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho \"args=$* env=$CNI_COMMAND\"\nexec cat\n"
	if err := os.WriteFile(filepath.Join(dir, "x-direct"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789abcdef", 16<<10)
	tests := []struct {
		name, child, stdin, want string
		fail                     bool
	}{
		{name: "stdin replaced, larger than a pipe", child: "replaced", stdin: "runtime's config", want: big},
		{name: "stdin inherited", child: "inherited", stdin: "runtime's config", want: "runtime's config"},
		{name: "stdin closed before", child: "closed", want: big},
		{name: "direct binary on CNI_PATH", child: "direct", want: "args=-test.run=^TestExecHelperProcess$ env=ADD\nconfig"},
		{name: "direct binary missing", child: "missing", fail: true,
			want: `x: x-missing-direct runs this call here, and x-missing-direct is not installed next to`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestExecHelperProcess$")
			cmd.Env = append(os.Environ(), "FORWARD_TEST_CHILD="+tc.child, "CNI_PATH="+dir, "CNI_COMMAND=ADD")
			cmd.Stdin = strings.NewReader(tc.stdin)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if tc.fail {
				if err == nil || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), `"code": 999`) {
					t.Fatalf("want exit 1 with a CNI error containing %q; got %v, stdout %q", tc.want, err, out)
				}
				return
			}
			if err != nil || string(out) != tc.want {
				t.Fatalf("exit %v, stdout %d bytes %.80q, want %d bytes %.80q; stderr %s", err, len(out), out, len(tc.want), tc.want, stderr.String())
			}
		})
	}
}
