package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/rdmanet/rdmanet/internal/fsutil"
)

// CheckpointFile is the kubelet plugin's record of prepared claims, in its
// state dir: what Prepare did for each claim UID, so Prepare stays
// idempotent and Unprepare cleans up after an agent or kubelet restart.
const CheckpointFile = "checkpoint.json"

// checkpointVersion is the format of CheckpointFile.
const checkpointVersion = 1

// checkpoint is CheckpointFile's content.
type checkpoint struct {
	Version int                          `json:"version"`
	Claims  map[types.UID]*preparedClaim `json:"claims"`
}

// preparedClaim is what Prepare did for one claim: its devices, the CDI
// spec file (rebuilt from them) and the device-info files.
type preparedClaim struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []preparedDevice `json:"devices"`
	// Env is the claim's NCCL environment (ncclenv.go), given with its
	// first CDI device; absent in checkpoints of older agents.
	Env []string `json:"env,omitempty"`
	// Pods are the pods the claim was reserved for when it was prepared:
	// the device health Events go to them. Absent in checkpoints of older
	// agents (their claims' health changes are logged and counted only).
	Pods []PodRef `json:"pods,omitempty"`
}

// preparedDevice is one allocated device of a claim as it was prepared.
type preparedDevice struct {
	Requests []string   `json:"requests"`
	Pool     string     `json:"pool"`
	Device   string     `json:"device"`
	ShareID  *types.UID `json:"shareID,omitempty"`
	// CDIName is the device's name in the claim's CDI spec.
	CDIName  string   `json:"cdiName"`
	Kind     string   `json:"kind"`
	Resource string   `json:"resource"`
	PCI      string   `json:"pci"`
	PF       string   `json:"pf,omitempty"`
	RDMA     string   `json:"rdma,omitempty"`
	CharDevs []string `json:"charDevices"`
	Env      []string `json:"env,omitempty"`
	// DevInfo: a device-info file was written for (Resource, PCI).
	DevInfo bool `json:"devInfo,omitempty"`
	// LinkLayer of the RDMA device's port (Ethernet, InfiniBand) and, on
	// Ethernet, the RoCE v2 IPv4 GID index for NCCL_IB_GID_INDEX (nil when
	// unknown): so that a later claim of the same pod can be joined with
	// this one after a restart. Absent in checkpoints of older agents.
	LinkLayer string `json:"linkLayer,omitempty"`
	GIDIndex  *int   `json:"gidIndex,omitempty"`
	// gidWhy says why GIDIndex is unknown (logs only).
	gidWhy string
}

func (c *preparedClaim) name() string { return c.Namespace + "/" + c.Name }

// loadCheckpoint reads the checkpoint in dir; none yet is an empty one.
func loadCheckpoint(dir string) (*checkpoint, error) {
	p := filepath.Join(dir, CheckpointFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &checkpoint{Version: checkpointVersion, Claims: map[types.UID]*preparedClaim{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("DRA checkpoint %s: %w", p, err)
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("DRA checkpoint %s is not valid JSON: %w; fix: it is only ever replaced whole, so something else wrote it: "+
			"move it aside and restart the agent, then check that no pod holds a device twice (kubectl get resourceclaims -A)", p, err)
	}
	if cp.Version != checkpointVersion {
		return nil, fmt.Errorf("DRA checkpoint %s: version %d, this agent reads version %d; fix: run the agent release that wrote it, or move the file aside after unpreparing its claims", p, cp.Version, checkpointVersion)
	}
	if cp.Claims == nil {
		cp.Claims = map[types.UID]*preparedClaim{}
	}
	return &cp, nil
}

// save replaces the checkpoint in dir atomically, root-only (0600).
func (cp *checkpoint) save(dir string) error {
	b, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return fmt.Errorf("DRA checkpoint: %w", err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, CheckpointFile), b, 0o600); err != nil {
		return fmt.Errorf("DRA checkpoint: %w", err)
	}
	return nil
}
