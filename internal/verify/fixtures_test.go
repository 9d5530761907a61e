package verify

import (
	"encoding/json"

	vt "github.com/rdmanet/rdmanet/internal/verify/verifytest"
)

// Short names for the shared fixtures (package verifytest).
const (
	testNS          = vt.NS
	testNode        = vt.NodeName
	exclusiveStatus = vt.ExclusiveStatus
	statusDefault   = vt.StatusDefault
	loLink          = vt.LoLink
	loAddr          = vt.LoAddr
	ibLog           = vt.IBLog
	socketLog       = vt.SocketLog
)

var (
	exclusivePod  = vt.ExclusivePod
	sharedPod     = vt.SharedPod
	hostPod       = vt.HostPod
	noIPCLock     = vt.NoIPCLock
	exclusiveNAD  = vt.ExclusiveNAD
	sharedNAD     = vt.SharedNAD
	testNodeObj   = vt.NodeObj
	exclusiveExec = vt.ExclusiveExec
	sharedExec    = vt.SharedExec
	hostExec      = vt.HostExec
)

func nadFrom(obj map[string]any) *NAD {
	b, _ := json.Marshal(obj)
	md := obj["metadata"].(map[string]any)
	rn, _ := md["annotations"].(map[string]any)["k8s.v1.cni.cncf.io/resourceName"].(string)
	return &NAD{Namespace: md["namespace"].(string), Name: md["name"].(string), ResourceName: rn, Raw: b}
}
