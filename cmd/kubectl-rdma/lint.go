package main

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

func init() { register(newLintCmd) }

func newLintCmd(s streams) *cobra.Command {
	var output string
	var listRules bool
	var failOn string
	cmd := &cobra.Command{
		Use:   "lint PATH...",
		Short: "Check training workloads, NADs and device plugin configs against the RDMA rules",
		Long: `lint reads Kubernetes manifests (YAML or JSON; files, directories, or - for
stdin; multi-document files and Lists) and, for every pod template, decides its
RDMA mode (exclusive, shared, host, tcp, unknown) from the evidence, then checks
it against the NetworkAttachmentDefinitions, device plugin pools and Services of
the same input.

Understood: Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob,
PyTorchJob/MPIJob/TFJob (kubeflow.org), Volcano Job, JobSet, LeaderWorkerSet;
NetworkAttachmentDefinition; ConfigMaps holding a SR-IOV device plugin
"resourceList" or an rdma-shared-dev-plugin "configList"; NicClusterPolicy,
MacvlanNetwork, IPoIBNetwork, SriovNetwork, SriovIBNetwork,
SriovNetworkNodePolicy, SpiderMultusConfig; DRA (resource.k8s.io/v1)
DeviceClass, ResourceClaim, ResourceClaimTemplate and pods' spec.resourceClaims
(a request whose class selects driver rdma.rdmanet.io is the pod's RDMA NIC,
its kind the mode; deploy/dra's class names are known without the class);
the k8s.v1.cni.cncf.io/networks and tke.cloud.tencent.com/networks annotations.

Lint related objects together (e.g. a whole directory): the three-place
resource name check, NAD lookups and the rendezvous Service checks need them.

Exit status: 0 no error findings, 1 at least one error finding (or one at the
--fail-on severity), 2 input that cannot be read or parsed (the message names
the file and line).

Rules: docs/lint-rules.md, or 'kubectl rdma lint --rules'.`,
		Example: `  kubectl rdma lint examples/seeds/exclusive/
  kubectl rdma lint -o json job.yaml nad.yaml sriovdp-config.yaml
  helm template ./chart | kubectl rdma lint -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if listRules {
				rules := append([]lint.Rule(nil), lint.Catalogue...)
				sort.Slice(rules, func(i, j int) bool { return rules[i].ID < rules[j].ID })
				for _, r := range rules {
					fmt.Fprintf(s.out, "%s  %-8s %-38s %s\n", r.ID, r.Severity, r.Name, r.Summary)
				}
				return nil
			}
			if len(args) == 0 {
				return &exitError{code: exitInput, err: fmt.Errorf("lint: give at least one file, directory or - (stdin)")}
			}
			if output != "text" && output != "json" {
				return &exitError{code: exitInput, err: fmt.Errorf("lint: -o %q: want text or json", output)}
			}
			threshold := lint.Severity(failOn)
			if threshold != lint.Error && threshold != lint.Warning && threshold != lint.Info {
				return &exitError{code: exitInput, err: fmt.Errorf("lint: --fail-on %q: want error, warning or info", failOn)}
			}
			objs, err := manifest.ReadPaths(args, s.in)
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			res, err := lint.Lint(objs)
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			if output == "json" {
				err = res.WriteJSON(s.out)
			} else {
				err = res.WriteText(s.out, lint.TextOptions{Color: isTerminal(s.out)})
			}
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			if res.Fails(threshold) {
				return &exitError{code: exitFindings}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&listRules, "rules", false, "list the rule catalogue and exit")
	cmd.Flags().StringVar(&failOn, "fail-on", "error", "lowest severity that makes the exit status 1: error, warning or info")
	return cmd
}
