package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignals: the built pause exits 0 on SIGTERM and on SIGINT, and not
// before.
func TestSignals(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pause")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tests := []struct {
		name string
		sig  syscall.Signal
	}{
		{"SIGTERM", syscall.SIGTERM},
		{"SIGINT", syscall.SIGINT},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				t.Fatalf("pause exited on its own: %v", err)
			case <-time.After(300 * time.Millisecond):
			}
			// a SIGCHLD-like stray signal must not stop it either
			_ = cmd.Process.Signal(syscall.SIGCHLD)
			time.Sleep(50 * time.Millisecond)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("pause after %v: %v, want exit 0", tc.sig, err)
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("pause did not exit on %v", tc.sig)
			}
		})
	}
}

// TestReap: reap collects exited children (zombies) without blocking.
func TestReap(t *testing.T) {
	var pids []int
	for range 3 {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
		if err != nil {
			t.Skipf("cannot start /bin/true: %v", err)
		}
		pids = append(pids, pid)
	}
	// wait until all three are zombies
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for !isZombie(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("child %d never became a zombie", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if n := reap(); n != len(pids) {
		t.Fatalf("reap collected %d children, want %d", n, len(pids))
	}
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("child %d still in /proc after reap", pid)
		}
	}
	if n := reap(); n != 0 {
		t.Fatalf("second reap collected %d", n)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}
