// Package sysfsfixture is the tests' name for internal/sysfsfixture, the
// builder of realistic sysfs trees. The builder moved to internal/ because
// the simulated-node demo (internal/sim, in kubectl-rdma) builds its nodes
// with it at run time, and no shipped binary may link code under test/.
// Every name here is an alias of the one there; new code imports
// github.com/rdmanet/rdmanet/internal/sysfsfixture directly, and a name added
// there is usable here once it is listed below.
package sysfsfixture

import fx "github.com/rdmanet/rdmanet/internal/sysfsfixture"

// Types.
type (
	CloudVM         = fx.CloudVM
	CloudVMOptions  = fx.CloudVMOptions
	Function        = fx.Function
	HyperVVM        = fx.HyperVVM
	IBNode          = fx.IBNode
	IBNodeOptions   = fx.IBNodeOptions
	IBOnlyVM        = fx.IBOnlyVM
	IBPort          = fx.IBPort
	LinkLayer       = fx.LinkLayer
	Mlx5SFNode      = fx.Mlx5SFNode
	Node            = fx.Node
	SF              = fx.SF
	Standard        = fx.Standard
	StandardOptions = fx.StandardOptions
	Upper           = fx.Upper
	VMDNode         = fx.VMDNode
)

// Builders and helpers.
var (
	IPoIBAddress   = fx.IPoIBAddress
	New            = fx.New
	NewCloudVM     = fx.NewCloudVM
	NewHyperVVM    = fx.NewHyperVVM
	NewIBNode      = fx.NewIBNode
	NewIBOnlyVM    = fx.NewIBOnlyVM
	NewMlx5SFNode  = fx.NewMlx5SFNode
	NewStandard    = fx.NewStandard
	NewVMDNode     = fx.NewVMDNode
	ParseSysfsGUID = fx.ParseSysfsGUID
	StandardGPUs   = fx.StandardGPUs
	SysfsGUID      = fx.SysfsGUID
	VFBDF          = fx.VFBDF
)

// Constants.
const (
	ClassGPU        = fx.ClassGPU
	ClassVMD        = fx.ClassVMD
	DefaultPKey     = fx.DefaultPKey
	DeviceBCM57414  = fx.DeviceBCM57414
	DeviceCX5       = fx.DeviceCX5
	DeviceCX5VF     = fx.DeviceCX5VF
	DeviceCX6Dx     = fx.DeviceCX6Dx
	DeviceCX6DxVF   = fx.DeviceCX6DxVF
	DeviceCX7       = fx.DeviceCX7
	DeviceCX7VF     = fx.DeviceCX7VF
	DeviceH100SXM   = fx.DeviceH100SXM
	DeviceH200SXM   = fx.DeviceH200SXM
	DeviceVMD       = fx.DeviceVMD
	DeviceVirtioNet = fx.DeviceVirtioNet
	DeviceX710      = fx.DeviceX710
	Ethernet        = fx.Ethernet
	HyperVVMBus     = fx.HyperVVMBus
	InfiniBand      = fx.InfiniBand
	KindBond        = fx.KindBond
	KindBridge      = fx.KindBridge
	KindMacvlan     = fx.KindMacvlan
	KindVLAN        = fx.KindVLAN
	MaxStandardGPUs = fx.MaxStandardGPUs
	PKeyTableSize   = fx.PKeyTableSize
	VendorBroadcom  = fx.VendorBroadcom
	VendorIntel     = fx.VendorIntel
	VendorMellanox  = fx.VendorMellanox
	VendorNVIDIA    = fx.VendorNVIDIA
	VendorVirtio    = fx.VendorVirtio
	VirtioIDNet     = fx.VirtioIDNet
	ZeroGUID        = fx.ZeroGUID
)
