package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rdmanet/rdmanet/internal/pairprobe"
	"github.com/rdmanet/rdmanet/internal/verify"
)

func init() { register(newVerifyCmd) }

// verifyConn is the cluster connection verify works over.
type verifyConn struct {
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	exec      verify.Executor
	logs      verify.LogReader // nil: through client
	namespace string           // the kubeconfig context's namespace
}

// verifyDeps connects to the cluster; tests pass fakes.
type verifyDeps struct {
	connect func(kubeconfig, context string) (*verifyConn, error)
}

func newVerifyCmd(s streams) *cobra.Command {
	return newVerifyCmdWith(s, verifyDeps{connect: verifyConnect})
}

func newVerifyCmdWith(s streams, deps verifyDeps) *cobra.Command {
	var (
		output, namespace, selector, container, kubeconfig, kubecontext string
		ncclLogs, listOnly, pairs, podChecks                            bool
		timeout                                                         time.Duration
		probeImage                                                      string
		probePort                                                       int
	)
	cmd := &cobra.Command{
		Use:   "verify POD | pod/NAME | job/NAME | deploy/NAME | sts/NAME | -l SELECTOR",
		Short: "Verify running RDMA pods layer by layer (node resource, NADs and network-status, inside the pod, NCCL log) and every pair of a workload's pods across nodes (reachable, MTU with DF, subnet, placement)",
		Long: `verify checks running training pods the way the seeds' verification does it by
hand, one layer after the other:

  node     the node's capacity and allocatable of the RDMA extended resource the
           pod requests, and how much of it the node's pods hold
  network  the NADs of the k8s.v1.cni.cncf.io/networks annotation exist (and
           their resourceName is requested), the network-status annotation names
           them with interface and IPs, and (exclusive) the VF's device-info
  pod      inside the pod, through exec with busybox commands only (ip -o link/
           addr/route, ls and cat under /sys/class/infiniband, /dev/infiniband,
           CapEff in /proc/self/status, ulimit -l, env and /proc/1/environ):
           net1 is up with its addresses, the default route is not via net1, the
           RDMA device is in the pod, its GID table has a RoCEv2 IPv4 entry (and
           which index), memlock is unlimited or CAP_IPC_LOCK lifts it,
           CAP_IPC_LOCK is effective, NCCL_IB_DISABLE/NCCL_NET, NCCL_IB_HCA,
           NCCL_SOCKET_IFNAME and NCCL_IB_GID_INDEX fit what the pod has
  nccl     with --nccl-logs: the container's log read by 'kubectl rdma nccl':
           did NCCL use NET/IB, or fall back to sockets
  pairs    for a workload (job/, deploy/, sts/) or -l SELECTOR: every ordered
           pair of its running pods over the training network, from inside
           the pods (see PAIRS below)

PAIRS (the cross-node layer; a single-node test can pass while the path
between nodes is broken):

  Each pod's training addresses are the non-default entries of its
  k8s.v1.cni.cncf.io/network-status annotation. For every ordered pair
  (from, to) and every network both have, one cell says ok or the failing
  layer, the first of:
    subnet       both addresses are not in one subnet of the NAD's IPAM
                 (range, ipRanges, subnet, ranges), or the pods share no
                 training network
    unreachable  no UDP echo from the peer's training address
    mtu          a datagram of MTU - 28 bytes (IPv4; - 48 IPv6) with
                 don't-fragment set was not echoed; the largest that was is
                 reported. The MTU is the NAD's "mtu" (else network-status'
                 mtu, else the pod's interface MTU)
    same-node    both pods run on one node although a required
                 podAntiAffinity term, or a topologySpreadConstraint with
                 whenUnsatisfiable DoNotSchedule, over kubernetes.io/hostname
                 selects them (pairs on one node are ok otherwise, and marked
                 cross_node false)

  How: the probe is rdmanet-probe from rdmanet's own image, run as an
  ephemeral container in each pod (so in the pod's network namespace; no
  tool of the training image is used, any image works). First a UDP echo
  responder in every pod (ephemeral container rdma-probe-s-<run>), then a
  client in every pod (rdma-probe-c-<run>) that probes every peer in
  parallel from its training interface and source address; the results are
  read from the clients' logs. The containers run as user 65534 with no
  capabilities (restricted Pod Security); they stop by themselves, but
  ephemeral containers cannot be removed: each run adds two to every pod's
  spec. The image defaults to the rdmanet-node DaemonSet's in rdmanet-system
  (every node has it); --probe-image overrides. UDP port --probe-port.

  RBAC: update pods/ephemeralcontainers, get pods/log, get daemonsets in
  rdmanet-system (unless --probe-image), list nodes (spread constraints).
  Kubernetes 1.25 or later. Progress lines go to stderr.

  The pair layer runs by default for workloads and selectors; --pairs=false
  turns it off, --pod-checks=false runs it alone (no exec into the training
  image: the way to verify an image without a shell, or simulated nodes
  without RDMA devices).

The mode (exclusive, shared, host) is decided by the rules of 'kubectl rdma
lint' over the live pod and its NADs; checks that do not apply are skipped
(a hostNetwork pod has no net1, but still needs /dev/infiniband, IPC_LOCK and
the NCCL variables).

The container checked is the one requesting the RDMA resource (else the first
with NCCL_* variables, else the first); -c picks another.

Every line is one check: layer, check, OK / PROBLEM / UNKNOWN / SKIP, the
evidence, and for problems the fix. 'kubectl rdma verify --checks' lists them.

Output -o json: {"pods":[...per-pod reports...],"pairs":{...pair report...},
"summary":{...,"result":"ok|problem|unknown"}} (docs/kubectl-rdma.md, verify,
gives the schema).

Exit status: 0 every check ok (or skipped) and every pair ok, 1 a problem
found (stderr names the first failing pair and its layer), 2 nothing or not
everything could be checked (API unreachable, pod or workload not found, a
pod not running, no training network, exec refused, probe image not
pullable, --timeout reached) and no problem found.`,
		Example: `  kubectl rdma verify face-trainer-0 -n ai-training
  kubectl rdma verify job/face-trainer -n ai-training --nccl-logs
  kubectl rdma verify statefulset/face-trainer -o json
  kubectl rdma verify -l app=face-trainer -n ai-training -c trainer
  kubectl rdma verify -n ai-training job/face-trainer --pod-checks=false -o json
  kubectl rdma verify -n ai-training deploy/trainer --probe-image rdmanet/rdmanet:0.2.0 --timeout 5m`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if listOnly {
				for _, c := range verify.Catalogue {
					fmt.Fprintf(s.out, "%-19s %-8s %s\n", c.ID, c.Layer, c.Summary)
				}
				return nil
			}
			if output != "text" && output != "json" {
				return &exitError{code: exitInput, err: fmt.Errorf("verify: -o %q: want text or json", output)}
			}
			target, err := verify.ParseTarget(args, selector)
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			runPairs := target.Kind != "pod"
			if cmd.Flags().Changed("pairs") {
				runPairs = pairs
			}
			if !runPairs && !podChecks {
				return &exitError{code: exitInput, err: fmt.Errorf("verify: --pod-checks=false and no pair layer (%s): nothing to check; fix: verify a workload (job/NAME, deploy/NAME, sts/NAME) or -l SELECTOR for the pair layer, or drop --pod-checks=false", target)}
			}
			if probePort < 1024 || probePort > 65535 {
				return &exitError{code: exitInput, err: fmt.Errorf("verify: --probe-port %d: want 1024-65535 (the probe runs without privileges)", probePort)}
			}
			conn, err := deps.connect(kubeconfig, kubecontext)
			if err != nil {
				return &exitError{code: exitInput, err: fmt.Errorf("verify: %w", err)}
			}
			ns := namespace
			if ns == "" {
				ns = conn.namespace
			}
			if ns == "" {
				ns = "default"
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			g := &verify.Gatherer{Client: conn.client, Dynamic: conn.dynamic, Exec: conn.exec, Logs: conn.logs, NCCLLogs: ncclLogs, Container: container}
			pods, err := g.Pods(ctx, ns, target)
			if err != nil {
				return &exitError{code: exitInput, err: fmt.Errorf("verify: %w", err)}
			}
			var reps []*verify.Report
			if podChecks {
				for i := range pods {
					reps = append(reps, verify.Run(g.Gather(ctx, &pods[i])))
				}
			}
			res := verify.NewResult(reps)
			var pairErr error
			if runPairs {
				pr := &verify.PairRunner{G: g, ProbeImage: probeImage, Port: probePort, Progress: s.err}
				rep, err := pr.Run(ctx, ns, target, pods)
				switch {
				case errors.Is(err, verify.ErrTooFewPods) && !cmd.Flags().Changed("pairs"):
					fmt.Fprintf(s.err, "verify: pair layer skipped: %v\n", err)
				case err != nil:
					pairErr = fmt.Errorf("verify: pairs: %w", err)
				}
				res.SetPairs(rep)
			}
			if output == "json" {
				err = res.WriteJSON(s.out)
			} else {
				err = res.WriteText(s.out, isTerminal(s.out))
			}
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			if p := res.Pairs; p != nil {
				if c := p.FirstProblem(); c != nil {
					return &exitError{code: exitFindings, err: fmt.Errorf("verify: pair %s → %s (node %s → node %s): %s: %s (%d of %d pair cells failed)", c.From, c.To, c.FromNode, c.ToNode, c.Status, c.Evidence, p.Summary.Problem, p.Summary.Cells)}
				}
			}
			switch {
			case res.Summary.Result == string(verify.Problem):
				return &exitError{code: exitFindings, err: pairErr}
			case pairErr != nil:
				return &exitError{code: exitInput, err: pairErr}
			case res.Summary.Result == string(verify.Unknown):
				if p := res.Pairs; p != nil {
					if c := p.FirstUnknown(); c != nil {
						return &exitError{code: exitInput, err: fmt.Errorf("verify: pair %s → %s could not be probed: %s", c.From, c.To, c.Evidence)}
					}
				}
				return &exitError{code: exitInput}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of the pods (default: the kubeconfig context's, else default)")
	f.StringVarP(&selector, "selector", "l", "", "verify the pods this label selector matches")
	f.StringVarP(&container, "container", "c", "", "container to exec into and read logs of (default: the one requesting the RDMA resource)")
	f.BoolVar(&ncclLogs, "nccl-logs", false, "read the container's log and check that NCCL used NET/IB (run NCCL with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.StringVar(&kubecontext, "context", "", "kubeconfig context to use")
	f.DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long (API calls, exec, logs, the pair probes)")
	f.BoolVar(&listOnly, "checks", false, "list the check catalogue and exit")
	f.BoolVar(&pairs, "pairs", false, "run the pair layer: every pair of the pods probed over the training network from ephemeral containers (default: on for job/, deploy/, sts/ and -l; off for one pod)")
	f.BoolVar(&podChecks, "pod-checks", true, "run the per-pod layers (node, network, exec into the pod, nccl); --pod-checks=false with a workload runs the pair layer alone")
	f.StringVar(&probeImage, "probe-image", "", "image of the pair probe (rdmanet's, with /opt/rdmanet/bin/rdmanet-probe; default: the rdmanet-node DaemonSet's image in rdmanet-system)")
	f.IntVar(&probePort, "probe-port", pairprobe.DefaultPort, "UDP port of the pair probe's responders in the pods")
	return cmd
}

// verifyConnect builds the clients from a kubeconfig.
func verifyConnect(kubeconfig, kubecontext string) (*verifyConn, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubecontext})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w; fix: pass --kubeconfig or set KUBECONFIG", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig namespace: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &verifyConn{client: cs, dynamic: dc, exec: verify.RemoteExecutor{Config: rc, Client: cs}, namespace: ns}, nil
}
