package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rdmanet/rdmanet/internal/render"
)

func init() { register(newRenderCmd) }

func newRenderCmd(s streams) *cobra.Command {
	var file string
	var f render.Spec
	cmd := &cobra.Command{
		Use:   "render [--mode exclusive|shared|host] [--dra] [flags]",
		Short: "Write the full manifest set for an RDMA mode (pool, NAD, Service, Job)",
		Long: `render writes the manifests of one mode, laid out as the seed documents lay them out:

  exclusive  SR-IOV device plugin ConfigMap (resourceList, isRdma VFs of the PFs),
             NetworkAttachmentDefinition with the sriov → rdma chain and rdmanet-ipam,
             headless Service, Indexed Job with the networks annotation, the VF
             resource, IPC_LOCK and NCCL_SOCKET_IFNAME.
  shared     rdma-shared-dev-plugin ConfigMap (configList with rdmaHcaMax; or
             --pool-format nicclusterpolicy), macvlan NAD on the RoCE PF with
             rdmanet-ipam, headless Service, Job requesting a shared HCA slot.
  host       shared pool for the /dev/infiniband nodes, headless Service, Job
             with hostNetwork, dnsPolicy ClusterFirstWithHostNet and whole-node
             placement.

The spec comes from -f FILE (YAML or JSON with the fields below) and/or flags;
flags override the file. The output passes 'kubectl rdma lint' with no finding
above info.

--dra (exclusive, shared) writes the Dynamic Resource Allocation path instead:
the same pool config (rdmanet-agent --dra publishes its pools) and NADs, a
DeviceClass per pool (driver rdma.rdmanet.io, the mode's kind, the pool's
k8s.cni.cncf.io/resourceName), a ResourceClaimTemplate <name>-devices with
GPU+NIC request pairs (class --gpu-device-class, default gpu.nvidia.com), one
matchAttribute resource.kubernetes.io/pcieRoot constraint per pair, and a Job
whose pods take the claim instead of device plugin limits. Host mode has no
DRA path.

InfiniBand (--link-type infiniband, --pf the IB port's IPoIB netdev): the
pools select IB functions (linkTypes ["infiniband"]); exclusive renders an
ib-sriov → rdma chain (pkey, link_state enable, capabilities infinibandGUID:
the VF's GUID comes from the pod's infiniband-guid or rdmanet's GUID pool),
shared an ipoib child of the IB port (pkey, optional mtu) on the shared
pool, host the same Job as on RoCE. No NCCL_IB_GID_INDEX in any mode (IB
needs none). --pkey names the partition. Not with --dra yet.

Multi-rail (exclusive, shared): give one --rail-subnet per --pf; rail i is PF i
with its own pool (<resourceName>_<i>), NAD (<network>-<i>), subnet and in-pod
interface net<i+1>, and the Job requests one device of each.

Spec fields: mode, name, namespace, resourcePrefix, resourceName, pfNames,
vendors, deviceIDs, rdmaHcaMax, poolFormat, poolNamespace, network, interface,
subnet, exclude, subnets, vlan, mtu, image, nodes, gpusPerNode, rdmaPerPod,
port, script, command, socketIfname, ncclDebug, dra, gpuDeviceClass, linkType, pkey.`,
		Example: `  kubectl rdma render --mode exclusive --name face-trainer -n ai-training \
      --pf enp65s0f0np0 --subnet 10.60.0.0/16 --exclude 10.60.0.0/24 --vlan 200 \
      --image registry.example.com/ai/face-training:v1 --nodes 2 --gpus-per-node 8
  kubectl rdma render --mode exclusive --name llm --pf enp65s0f0np0 --pf enp66s0f0np0 \
      --rail-subnet 10.60.0.0/16 --rail-subnet 10.61.0.0/16 --image registry.example.com/ai/llm:v1
  kubectl rdma render --mode exclusive --dra --name llm --pf enp65s0f0np0 --subnet 10.60.0.0/16 \
      --image registry.example.com/ai/llm:v1
  kubectl rdma render --mode shared --link-type infiniband --pkey 0x8005 --name llm --pf ibp193s0f1 \
      --subnet 10.70.0.0/16 --image registry.example.com/ai/llm:v1
  kubectl rdma render -f spec.yaml | kubectl apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var spec render.Spec
			if file != "" {
				var data []byte
				var err error
				if file == "-" {
					data, err = readAll(s)
				} else {
					data, err = os.ReadFile(file)
				}
				if err != nil {
					return &exitError{code: exitInput, err: err}
				}
				if spec, err = render.ParseSpec(data); err != nil {
					return &exitError{code: exitInput, err: fmt.Errorf("%s: %w", file, err)}
				}
			}
			overlay(cmd, &spec, &f)
			docs, err := render.Render(spec)
			if err != nil {
				return &exitError{code: exitInput, err: fmt.Errorf("render: invalid spec:\n%w", err)}
			}
			if err := render.Write(s.out, docs); err != nil {
				return &exitError{code: exitInput, err: err}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&file, "file", "f", "", "spec file (YAML/JSON), - for stdin")
	fl.StringVar(&f.Mode, "mode", "", "exclusive, shared or host")
	fl.StringVar(&f.Name, "name", "", "Job name (also names the Service <name>-rdzv and the NAD <name>-rdma)")
	fl.StringVarP(&f.Namespace, "namespace", "n", "", "namespace of the NAD, Service and Job (default \"default\")")
	fl.StringVar(&f.ResourcePrefix, "resource-prefix", "", "extended resource domain (default rdmanet.io)")
	fl.StringVar(&f.ResourceName, "resource-name", "", "pool name (default sriov_rdma / hca_shared)")
	fl.StringSliceVar(&f.PFNames, "pf", nil, "PF netdev name(s) of the RDMA NIC (repeatable)")
	fl.StringSliceVar(&f.Vendors, "vendor", nil, "PCI vendor selector (default 15b3)")
	fl.StringSliceVar(&f.DeviceIDs, "device-id", nil, "PCI device ID selector")
	fl.IntVar(&f.RdmaHcaMax, "rdma-hca-max", 0, "shared/host: pods per HCA (default 63)")
	fl.StringVar(&f.PoolFormat, "pool-format", "", "shared/host pool: configmap (default) or nicclusterpolicy")
	fl.StringVar(&f.Network, "network", "", "NAD name (default <name>-rdma)")
	fl.StringVar(&f.Interface, "interface", "", "in-pod interface of the training net (default net1)")
	fl.StringVar(&f.Subnet, "subnet", "", "training subnet CIDR (exclusive, shared)")
	fl.StringSliceVar(&f.Exclude, "exclude", nil, "CIDRs inside the subnet not to allocate")
	fl.StringSliceVar(&f.Subnets, "rail-subnet", nil, "multi-rail: one subnet per --pf, in order (rail i = PF i, its own pool, NAD and net<i+1>)")
	fl.IntVar(&f.VLAN, "vlan", 0, "exclusive: VLAN the sriov CNI sets on the VF")
	fl.IntVar(&f.MTU, "mtu", 0, "shared: macvlan MTU (default 9000)")
	fl.StringVar(&f.Image, "image", "", "training image")
	fl.IntVar(&f.Nodes, "nodes", 0, "number of nodes, one pod each (default 2)")
	fl.IntVar(&f.GPUsPerNode, "gpus-per-node", 0, "GPUs per pod (default 8)")
	fl.IntVar(&f.Port, "port", 0, "rendezvous port (default 29400)")
	fl.StringVar(&f.Script, "script", "", "training script torchrun runs (default /workspace/train.py)")
	fl.StringVar(&f.SocketIfname, "socket-ifname", "", "host mode: node interface for NCCL bootstrap (default the first PF)")
	fl.BoolVar(&f.NCCLDebug, "nccl-debug", false, "set NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (for kubectl rdma nccl)")
	fl.BoolVar(&f.DRA, "dra", false, "exclusive/shared: DRA path (DeviceClass per pool, ResourceClaimTemplate with GPU+NIC pairs, Job with resourceClaims)")
	fl.StringVar(&f.LinkType, "link-type", "", "the PFs' link layer: ethernet (RoCE, default) or infiniband (ib-sriov / ipoib networks, pools of IB functions)")
	fl.StringVar(&f.PKey, "pkey", "", "InfiniBand: the network's partition key, e.g. 0x8005 (default: the default partition; shared: the master's)")
	fl.StringVar(&f.GPUDeviceClass, "gpu-device-class", "", "with --dra: DeviceClass of the GPU requests (default gpu.nvidia.com)")
	return cmd
}

// overlay copies the flags the user set onto the spec.
func overlay(cmd *cobra.Command, dst, src *render.Spec) {
	set := func(name string) bool { return cmd.Flags().Changed(name) }
	if set("mode") {
		dst.Mode = src.Mode
	}
	if set("name") {
		dst.Name = src.Name
	}
	if set("namespace") {
		dst.Namespace = src.Namespace
	}
	if set("resource-prefix") {
		dst.ResourcePrefix = src.ResourcePrefix
	}
	if set("resource-name") {
		dst.ResourceName = src.ResourceName
	}
	if set("pf") {
		dst.PFNames = src.PFNames
	}
	if set("vendor") {
		dst.Vendors = src.Vendors
	}
	if set("device-id") {
		dst.DeviceIDs = src.DeviceIDs
	}
	if set("rdma-hca-max") {
		dst.RdmaHcaMax = src.RdmaHcaMax
	}
	if set("pool-format") {
		dst.PoolFormat = src.PoolFormat
	}
	if set("network") {
		dst.Network = src.Network
	}
	if set("interface") {
		dst.Interface = src.Interface
	}
	if set("subnet") {
		dst.Subnet = src.Subnet
	}
	if set("exclude") {
		dst.Exclude = src.Exclude
	}
	if set("rail-subnet") {
		dst.Subnets = src.Subnets
	}
	if set("vlan") {
		dst.VLAN = src.VLAN
	}
	if set("mtu") {
		dst.MTU = src.MTU
	}
	if set("image") {
		dst.Image = src.Image
	}
	if set("nodes") {
		dst.Nodes = src.Nodes
	}
	if set("gpus-per-node") {
		dst.GPUsPerNode = src.GPUsPerNode
	}
	if set("port") {
		dst.Port = src.Port
	}
	if set("script") {
		dst.Script = src.Script
	}
	if set("socket-ifname") {
		dst.SocketIfname = src.SocketIfname
	}
	if set("nccl-debug") {
		dst.NCCLDebug = src.NCCLDebug
	}
	if set("dra") {
		dst.DRA = src.DRA
	}
	if set("gpu-device-class") {
		dst.GPUDeviceClass = src.GPUDeviceClass
	}
	if set("link-type") {
		dst.LinkType = src.LinkType
	}
	if set("pkey") {
		dst.PKey = src.PKey
	}
}
