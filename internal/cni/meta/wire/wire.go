// Package wire is the protocol between the rdmanet CNI shim and the
// rdmanet daemon: one HTTP POST per CNI call over a unix socket. It has no
// Kubernetes dependencies so the shim binary stays small and starts fast.
package wire

import (
	"encoding/json"

	"github.com/containernetworking/cni/pkg/types"
)

// Path is the HTTP path of a CNI call.
const Path = "/cni"

// Request carries one CNI invocation as the runtime made it.
type Request struct {
	Command     string          `json:"command"` // ADD, DEL, CHECK, STATUS
	ContainerID string          `json:"containerID"`
	Netns       string          `json:"netns"`
	IfName      string          `json:"ifName"`
	Args        string          `json:"args"`
	Path        string          `json:"path"`
	Config      json.RawMessage `json:"config"`
}

// Response is the plugin's answer: a result (ADD) or a CNI error.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *types.Error    `json:"error,omitempty"`
}

// Conf is the part of the network config the shim reads.
type Conf struct {
	CNIVersion   string `json:"cniVersion"`
	DaemonSocket string `json:"daemonSocket"`
}
