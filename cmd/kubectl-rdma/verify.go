package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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
		ncclLogs, listOnly                                              bool
		timeout                                                         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "verify POD | pod/NAME | job/NAME | statefulset/NAME | -l SELECTOR",
		Short: "Verify running RDMA pods layer by layer: node resource, NADs and network-status, inside the pod (net1, route, device, GID, memlock, NCCL env), NCCL log",
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

The mode (exclusive, shared, host) is decided by the rules of 'kubectl rdma
lint' over the live pod and its NADs; checks that do not apply are skipped
(a hostNetwork pod has no net1, but still needs /dev/infiniband, IPC_LOCK and
the NCCL variables).

The container checked is the one requesting the RDMA resource (else the first
with NCCL_* variables, else the first); -c picks another.

Every line is one check: layer, check, OK / PROBLEM / UNKNOWN / SKIP, the
evidence, and for problems the fix. 'kubectl rdma verify --checks' lists them.

Exit status: 0 every check ok (or skipped), 1 a problem found, 2 nothing or
not everything could be checked (API unreachable, pod not found, exec
refused, pod not running) and no problem found.`,
		Example: `  kubectl rdma verify face-trainer-0 -n ai-training
  kubectl rdma verify job/face-trainer -n ai-training --nccl-logs
  kubectl rdma verify statefulset/face-trainer -o json
  kubectl rdma verify -l app=face-trainer -n ai-training -c trainer`,
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
			for i := range pods {
				reps = append(reps, verify.Run(g.Gather(ctx, &pods[i])))
			}
			res := verify.NewResult(reps)
			if output == "json" {
				err = res.WriteJSON(s.out)
			} else {
				err = res.WriteText(s.out, isTerminal(s.out))
			}
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			switch res.Summary.Result {
			case string(verify.Problem):
				return &exitError{code: exitFindings}
			case string(verify.Unknown):
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
	f.DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long (API calls, exec, logs)")
	f.BoolVar(&listOnly, "checks", false, "list the check catalogue and exit")
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
