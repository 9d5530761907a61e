// Package doctor checks a node (or a pod) for what an RDMA training job
// needs: RDMA devices and their netdevs, port and link state, the RDMA
// subsystem's netns mode, SR-IOV VFs, the RoCE GID table, /dev/infiniband
// nodes, memlock and CAP_IPC_LOCK, the default route and the NCCL_*
// environment.
//
// Gather reads the live system (every host path a parameter) into an Input;
// Run is a pure function over an Input, so tests feed it fixtures.
package doctor

import (
	"github.com/rdmanet/rdmanet/internal/install"
	"github.com/rdmanet/rdmanet/internal/inventory"
)

// Status of a check.
type Status string

const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Check is one outcome. A check ID may appear once per subject (device,
// port, PF); the subject is named in the message.
type Check struct {
	ID      string `json:"id"`
	Section string `json:"section"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Sections, in report order.
const (
	SecDevices = "devices"
	SecLink    = "link"
	SecNetns   = "netns"
	SecSRIOV   = "sriov"
	SecGID     = "gid"
	SecDev     = "dev"
	SecMemlock = "memlock"
	SecRoute   = "route"
	SecNCCL    = "nccl"
	SecCNI     = "cni"
)

// Sections lists the sections in report order.
var Sections = []string{SecDevices, SecLink, SecNetns, SecSRIOV, SecGID, SecDev, SecMemlock, SecRoute, SecNCCL, SecCNI}

// CheckInfo describes a check of the catalogue.
type CheckInfo struct {
	ID      string
	Section string
	Summary string
}

// Check IDs.
const (
	IDRDMADevices   = "rdma-devices"
	IDIbdev2netdev  = "ibdev2netdev"
	IDInventory     = "inventory"
	IDPortState     = "port-state"
	IDNetdevState   = "netdev-state"
	IDLinkLayer     = "link-layer"
	IDNetnsMode     = "rdma-netns-mode"
	IDNetnsFit      = "netns-mode-fit"
	IDSRIOVVFs      = "sriov-vfs"
	IDRoCEGID       = "roce-gid"
	IDDevInfiniband = "dev-infiniband"
	IDMemlock       = "memlock"
	IDCapIPCLock    = "cap-ipc-lock"
	IDDefaultRoute  = "default-route"
	IDNCCLTransport = "nccl-transport"
	IDNCCLIBHCA     = "nccl-ib-hca"
	IDNCCLSocketIf  = "nccl-socket-ifname"
	IDNCCLGIDIndex  = "nccl-gid-index"
	IDWhereabouts   = "whereabouts"
	IDCNIFallbacks  = "cni-fallbacks"
	IDIBPort        = "ib-port"
	IDIBPKey        = "ib-pkey"
)

// Catalogue lists every check, in report order.
var Catalogue = []CheckInfo{
	{IDRDMADevices, SecDevices, "at least one RDMA device (HCA) is visible"},
	{IDIbdev2netdev, SecDevices, "every RDMA device of a PF or NIC has its netdev (ibdev2netdev)"},
	{IDInventory, SecDevices, "sysfs was read completely"},
	{IDPortState, SecLink, "every RDMA port is ACTIVE"},
	{IDNetdevState, SecLink, "the netdev of every RDMA device is administratively and operationally up"},
	{IDLinkLayer, SecLink, "every RDMA port reports its link layer (InfiniBand or Ethernet/RoCE)"},
	{IDIBPort, SecLink, "every InfiniBand port has a LID and an SM LID (a subnet manager configured it) and a non-empty PKey table"},
	{IDIBPKey, SecLink, "every PKey the pod's networks use (--pkey) is in the IB port's PKey table with full membership"},
	{IDNetnsMode, SecNetns, "the RDMA subsystem's netns mode is known (kernel, or --rdma-netns-mode)"},
	{IDNetnsFit, SecNetns, "the netns mode fits the hardware: exclusive for SR-IOV VF pods, shared for shared-HCA pods"},
	{IDSRIOVVFs, SecSRIOV, "SR-IOV PFs have VFs enabled, all present, each with an RDMA device"},
	{IDRoCEGID, SecGID, "every RoCE port has a RoCEv2 IPv4 GID (the NCCL_IB_GID_INDEX to use)"},
	{IDDevInfiniband, SecDev, "the /dev/infiniband uverbs nodes of the RDMA devices exist"},
	{IDMemlock, SecMemlock, "RLIMIT_MEMLOCK is unlimited, or CAP_IPC_LOCK lifts it"},
	{IDCapIPCLock, SecMemlock, "CAP_IPC_LOCK is in the effective capability set"},
	{IDDefaultRoute, SecRoute, "the default route is not on a training (RDMA) interface"},
	{IDNCCLTransport, SecNCCL, "NCCL_IB_DISABLE / NCCL_NET do not turn RDMA off where it exists (or on where it does not)"},
	{IDNCCLIBHCA, SecNCCL, "NCCL_IB_HCA selects existing RDMA devices and ports"},
	{IDNCCLSocketIf, SecNCCL, "NCCL_SOCKET_IFNAME selects an existing, up interface"},
	{IDNCCLGIDIndex, SecNCCL, "NCCL_IB_GID_INDEX is the RoCEv2 IPv4 index of the selected RoCE ports"},
	{IDWhereabouts, SecCNI, "the node's CNI whereabouts binary, if any, is rdmanet's rdmanet-ipam (another one serves \"type\": \"whereabouts\" NADs with its own store)"},
	{IDCNIFallbacks, SecCNI, "every thin rdmanet CNI binary (rdmanet, sriov, rdma, rdmanet-ipam, whereabouts) has its -direct binary next to it, which does the call when rdmanet-daemon does not answer"},
}

// Input is everything the checks look at. Gather fills it from the live
// system; tests build it from fixtures.
type Input struct {
	SysfsRoot string
	Node      *inventory.Node
	// Netdevs are the interfaces visible in this network namespace
	// (<sysfs>/class/net) with their operstate.
	Netdevs map[string]string

	// NetnsMode is the kernel's answer ("" when it could not be asked),
	// NetnsModeErr why not, NetnsModeFlag the operator's statement.
	NetnsMode     string
	NetnsModeErr  error
	NetnsModeFlag string

	// DevRoot is the /dev directory; DevNodes says which
	// /dev/infiniband/<name> exist under it (keys are "/dev/infiniband/<name>").
	DevRoot    string
	DevNodes   map[string]bool
	DevListErr error

	Memlock Memlock
	Caps    Caps

	DefaultRouteLinks []string
	RouteErr          error
	// TrainingIfs are interfaces the operator names as training
	// interfaces (--training-if), in addition to the detected ones.
	TrainingIfs []string

	// PKeys are the InfiniBand partitions the pod's networks use (the
	// ib-sriov/ipoib NADs' pkey); each must be in the IB ports' tables.
	PKeys []uint16

	// Env holds the NCCL_* variables checked; EnvSource says whose they are.
	Env       map[string]string
	EnvSource string

	// CNIBinDir is the node's CNI bin directory ("" = not checked);
	// WhereaboutsOwner says whose whereabouts binary is there ("" none,
	// "rdmanet", or the other binary's description: install.WhereaboutsOwner).
	CNIBinDir        string
	WhereaboutsOwner string
	WhereaboutsErr   error
	// MissingFallbacks are the thin rdmanet binaries there without their
	// -direct binary (install.MissingFallbacks).
	MissingFallbacks []install.MissingFallback
	FallbacksErr     error
}

// Memlock is RLIMIT_MEMLOCK.
type Memlock struct {
	Known     bool   `json:"known"`
	Unlimited bool   `json:"unlimited"`
	Soft      uint64 `json:"soft_bytes,omitempty"`
	Hard      uint64 `json:"hard_bytes,omitempty"`
	Source    string `json:"source"`
	Err       string `json:"error,omitempty"`
}

// Caps is the effective capability set.
type Caps struct {
	Known  bool   `json:"known"`
	CapEff uint64 `json:"-"`
	Source string `json:"source"`
	Err    string `json:"error,omitempty"`
}

// capIPCLock is the bit of CAP_IPC_LOCK.
const capIPCLock = 14

// IPCLock reports whether CAP_IPC_LOCK is effective.
func (c Caps) IPCLock() bool { return c.Known && c.CapEff&(1<<capIPCLock) != 0 }
