package guidpool

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Hook actions.
const (
	ActionAllocate = "allocate"
	ActionRelease  = "release"
)

// HookEvent is what the subnet-manager hook is told.
type HookEvent struct {
	Action       string // allocate or release
	GUID         GUID
	PKey         string // the network's pkey as configured ("" when none)
	PodNamespace string
	PodName      string
	PodUID       string
	Network      string // the NAD's network name
	Node         string
	DeviceID     string // the VF's PCI address ("" on a release by the controller's GC)
	// Reason is why the controller's GC released the GUID (the pod is gone,
	// terminated, its node is gone; "" on the node's DEL and on allocate).
	Reason string
}

// Env is the hook's environment: RDMANET_HOOK_ACTION, RDMANET_GUID, ...
func (e HookEvent) Env() []string {
	return []string{
		"RDMANET_HOOK_ACTION=" + e.Action,
		"RDMANET_GUID=" + e.GUID.String(),
		"RDMANET_PKEY=" + e.PKey,
		"RDMANET_POD_NAMESPACE=" + e.PodNamespace,
		"RDMANET_POD_NAME=" + e.PodName,
		"RDMANET_POD_UID=" + e.PodUID,
		"RDMANET_NETWORK=" + e.Network,
		"RDMANET_NODE=" + e.Node,
		"RDMANET_DEVICE_ID=" + e.DeviceID,
		"RDMANET_RELEASE_REASON=" + e.Reason,
	}
}

// HookRunner runs the hook for one event.
type HookRunner interface {
	Run(ctx context.Context, e HookEvent) error
}

// ExecHook execs Command with the event as arguments (action, GUID, PKey,
// namespace/pod) and in the environment (HookEvent.Env), bounded by Timeout.
// A non-zero exit is an error carrying the hook's stderr.
type ExecHook struct {
	Command []string
	Timeout time.Duration
}

// Run execs the hook.
func (h ExecHook) Run(ctx context.Context, e HookEvent) error {
	if len(h.Command) == 0 {
		return nil
	}
	t := h.Timeout
	if t <= 0 {
		t = DefaultHookTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	args := append(append([]string{}, h.Command[1:]...), e.Action, e.GUID.String(), e.PKey, e.PodNamespace+"/"+e.PodName)
	cmd := exec.CommandContext(ctx, h.Command[0], args...)
	cmd.Env = append(os.Environ(), e.Env()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("GUID pool hook %s %s %s (pkey %s, pod %s/%s): %w: %s", h.Command[0], e.Action, e.GUID, e.PKey, e.PodNamespace, e.PodName, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// RunHook runs the pool's hook for e (Pool.Hook, else the configured command).
func (p *Pool) RunHook(ctx context.Context, e HookEvent) error {
	if p.Hook != nil {
		return p.Hook.Run(ctx, e)
	}
	return ExecHook{Command: p.Config.Hook, Timeout: p.Config.HookTimeout}.Run(ctx, e)
}
