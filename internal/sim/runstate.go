package sim

// The work dir's state file: the lock against a second demo (BusyError) and what --cleanup reads.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rdmanet/rdmanet/internal/netops"
)

// BusyError means another demo holds the work dir.
type BusyError struct {
	WorkDir string
	State   RunState
}

func (e *BusyError) Error() string {
	what := "running"
	fix := "wait for it to finish"
	if e.State.Kept {
		what = "kept up (--keep)"
		fix = "`kubectl rdma demo --cleanup` removes it"
	} else if !pidAlive(e.State.PID) {
		what = "left behind by a run that died"
		fix = "`kubectl rdma demo --cleanup` removes it"
	}
	return fmt.Sprintf("another demo is %s in %s: started %s by pid %d, %d pods, namespaces %s-*; fix: %s",
		what, e.WorkDir, e.State.Started.Format(time.RFC3339), e.State.PID, len(e.State.Pods), e.State.Layout.Prefix, fix)
}

// RunState is the work dir's state file: the lock against a second run and
// what --cleanup needs after --keep (or after a run that died).
type RunState struct {
	PID     int                 `json:"pid"`
	Started time.Time           `json:"started"`
	Kept    bool                `json:"kept"`
	Layout  layout              `json:"layout"`
	Nodes   []nodeDef           `json:"nodes"`
	Pods    []keptPod           `json:"pods"`
	Before  *HostState          `json:"before,omitempty"`
	RDMA    map[string][]string `json:"rdmaDevices,omitempty"` // node -> RDMA devices
}

type keptPod struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Node        string `json:"node"`
	Mode        string `json:"mode"`
	ContainerID string `json:"containerID"`
	Netns       string `json:"netns"`
	UID         string `json:"uid"`
}

func statePath(workDir string) string { return filepath.Join(workDir, "state.json") }

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

// ReadState returns the work dir's state, ok false when no demo is there.
func ReadState(workDir string) (RunState, bool, error) {
	var s RunState
	b, err := os.ReadFile(statePath(workDir))
	if errors.Is(err, os.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("demo state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, true, fmt.Errorf("demo state %s is corrupt: %w; fix: delete it after removing the demo's namespaces (`ip netns list`)", statePath(workDir), err)
	}
	return s, true, nil
}

func writeState(s *RunState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return netops.WriteFileAtomic(statePath(s.Layout.WorkDir), b, 0o600)
}

// lock creates the state file exclusively; a present one means another demo.
func lock(s *RunState) error {
	if err := os.MkdirAll(s.Layout.WorkDir, 0o755); err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	f, err := os.OpenFile(statePath(s.Layout.WorkDir), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		prev, _, rerr := ReadState(s.Layout.WorkDir)
		if rerr != nil {
			return rerr
		}
		return &BusyError{WorkDir: s.Layout.WorkDir, State: prev}
	}
	if err != nil {
		return fmt.Errorf("demo state: %w", err)
	}
	f.Close()
	return writeState(s)
}
