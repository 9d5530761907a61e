package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rdmanet/rdmanet/internal/doctor"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/netops"
)

func init() { register(newDoctorCmd) }

// doctorDeps are what doctor asks outside the host paths: the kernel's RDMA
// netns mode (netlink) and the process environment. Tests pass fakes to
// newDoctorCmdWith instead of swapping globals.
type doctorDeps struct {
	netnsMode func() (string, error)
	environ   func() []string
}

func newDoctorCmd(s streams) *cobra.Command {
	return newDoctorCmdWith(s, doctorDeps{netnsMode: netops.Netlink{}.NetnsMode, environ: os.Environ})
}

func newDoctorCmdWith(s streams, deps doctorDeps) *cobra.Command {
	var (
		o        doctor.GatherOptions
		output   string
		envFile  string
		envKV    []string
		listVFs  bool
		listOnly bool
		pkeys    []string
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this node (or pod) for RDMA: devices, ports, netns mode, VFs, GIDs, /dev/infiniband, memlock, routes, NCCL env",
		Long: `doctor reads the live system through the node inventory (sysfs, procfs, /dev,
RDMA netlink) and checks what an RDMA training job needs:

  devices  RDMA devices and their netdevs (ibdev2netdev)
  link     port state (ACTIVE), netdev up, link layer (RoCE / InfiniBand)
  netns    the RDMA subsystem's netns mode and whether it fits the hardware
  sriov    VFs enabled and present per PF, each with an RDMA device
  gid      the RoCEv2 IPv4 GID index per RoCE port (show_gids)
  dev      /dev/infiniband/uverbsN of the devices
  memlock  RLIMIT_MEMLOCK and CAP_IPC_LOCK
  route    the default route is not on a training interface
  nccl     NCCL_IB_DISABLE/NCCL_NET, NCCL_IB_HCA, NCCL_SOCKET_IFNAME and
           NCCL_IB_GID_INDEX against what exists
  ib       InfiniBand ports: LID and SM LID set, a PKey table (ib-port); each
           --pkey in every IB port's table with full membership (ib-pkey)

Run it on a node, or in a training pod (kubectl exec … -- kubectl-rdma doctor)
to see what the pod sees. The NCCL variables checked are the process's own;
--env-file (env output, a shell snippet, or /proc/<pid>/environ) or --env K=V
check another set, e.g. a pod's. Memlock and capabilities are those of
--pid (default: doctor itself).

Every check passes, warns or fails, with the fix. Check IDs: see
docs/kubectl-rdma.md or 'kubectl rdma doctor --checks'.

Exit status: 0 no failed check, 1 a failed check, 2 bad usage or an
unreadable sysfs root.`,
		Example: `  kubectl rdma doctor
  kubectl rdma doctor -o json
  kubectl rdma doctor --rdma-netns-mode exclusive --env NCCL_IB_HCA=mlx5_1 --env NCCL_SOCKET_IFNAME=net1
  kubectl exec job/face-trainer -- env > pod.env && kubectl rdma doctor --env-file pod.env
  kubectl rdma doctor --pkey 0x8005 --pkey 0x8006
  kubectl rdma doctor --sysfs-root /tmp/x/sys --proc-root /tmp/x/proc --dev-root /tmp/x/dev`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if listOnly {
				for _, c := range doctor.Catalogue {
					fmt.Fprintf(s.out, "%-20s %-8s %s\n", c.ID, c.Section, c.Summary)
				}
				return nil
			}
			if output != "text" && output != "json" {
				return &exitError{code: exitInput, err: fmt.Errorf("doctor: -o %q: want text or json", output)}
			}
			switch o.NetnsModeFlag {
			case "", inventory.NetnsExclusive, inventory.NetnsShared:
			default:
				return &exitError{code: exitInput, err: fmt.Errorf("doctor: --rdma-netns-mode %q: want exclusive or shared", o.NetnsModeFlag)}
			}
			env, src, err := doctorEnv(deps, envFile, envKV)
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			o.Env, o.EnvSource = env, src
			if o.PKeys, err = parsePKeys(pkeys); err != nil {
				return &exitError{code: exitInput, err: err}
			}
			o.NetnsMode = deps.netnsMode
			in, err := doctor.Gather(o)
			if err != nil {
				return &exitError{code: exitInput, err: fmt.Errorf("doctor: %w", err)}
			}
			rep := doctor.Run(in)
			if output == "json" {
				err = rep.WriteJSON(s.out)
			} else {
				err = rep.WriteText(s.out, doctor.TextOptions{Color: isTerminal(s.out), VFs: listVFs})
			}
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			if rep.Failed() {
				return &exitError{code: exitFindings}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	f.StringVar(&o.SysfsRoot, "sysfs-root", "/sys", "sysfs mount (PCI, net and infiniband trees); a fixture tree in tests")
	f.StringVar(&o.ProcRoot, "proc-root", "/proc", "procfs mount: <pid>/limits (memlock), <pid>/status (CapEff), <pid>/net/route (default route)")
	f.StringVar(&o.DevRoot, "dev-root", "/dev", "device directory whose infiniband/ holds the uverbs nodes")
	f.StringVar(&o.PID, "pid", "self", "process whose memlock limit, capabilities and routing table are checked (e.g. the training process, with hostPID)")
	f.StringVar(&o.NetnsModeFlag, "rdma-netns-mode", "", "state the RDMA netns mode (exclusive|shared) where the kernel cannot report it (`rdma system`); the kernel's answer wins")
	f.StringSliceVar(&o.TrainingIfs, "training-if", nil, "interface(s) to treat as training interfaces for the default-route check (netN, VF netdevs and NCCL_IB_HCA's netdevs are detected)")
	f.StringVar(&envFile, "env-file", "", "check the NCCL_* variables of this file (KEY=VALUE lines, or /proc/<pid>/environ) instead of doctor's own environment")
	f.StringArrayVar(&envKV, "env", nil, "check this KEY=VALUE instead of doctor's own environment (repeatable; applied after --env-file)")
	f.StringArrayVar(&pkeys, "pkey", nil, "InfiniBand partition the pods' networks use (the ib-sriov/ipoib NAD's pkey, e.g. 0x8005; repeatable): ib-pkey checks it is in every IB port's PKey table with full membership")
	f.BoolVar(&listVFs, "vfs", false, "list SR-IOV VF devices in the ibdev2netdev and show_gids listings (JSON always has them)")
	f.BoolVar(&listOnly, "checks", false, "list the check catalogue and exit")
	f.StringVar(&o.CNIBinDir, "cni-bin-dir", "/opt/cni/bin", "the node's CNI bin directory: warn when its whereabouts binary is not rdmanet's, fail when a thin rdmanet binary there lacks its -direct fallback (\"\" skips both checks)")
	return cmd
}

// parsePKeys reads --pkey values as the ib-sriov and ipoib plugins read a
// NAD's pkey (hex, with or without 0x and the membership bit).
func parsePKeys(vals []string) ([]uint16, error) {
	var out []uint16
	for _, v := range vals {
		k, err := inventory.ParsePKey(v)
		if err != nil || k&0x7fff == 0 {
			return nil, fmt.Errorf("doctor: --pkey %q: want a PKey in hex with a partition number other than 0, e.g. 0x8005", v)
		}
		out = append(out, k)
	}
	return out, nil
}

// doctorEnv returns the environment to check and a description of it.
func doctorEnv(deps doctorDeps, file string, kv []string) (map[string]string, string, error) {
	if file == "" && len(kv) == 0 {
		return doctor.EnvFromList(deps.environ()), "process", nil
	}
	env := map[string]string{}
	var src []string
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, "", fmt.Errorf("doctor: --env-file: %w", err)
		}
		defer f.Close()
		if env, err = doctor.ParseEnvFile(f); err != nil {
			return nil, "", fmt.Errorf("doctor: --env-file %s: %w", file, err)
		}
		src = append(src, file)
	}
	for _, s := range kv {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, "", fmt.Errorf("doctor: --env %q: want KEY=VALUE", s)
		}
		env[k] = v
	}
	if len(kv) > 0 {
		src = append(src, "--env")
	}
	return env, strings.Join(src, " + "), nil
}
