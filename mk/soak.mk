# Fault soak (issue 15), docs/soak.md. Root (netns).
#
# SOAK_TARGET=sim (default): pod attach/detach cycles over the exclusive,
# shared and host modes on two simulated nodes, each with a real
# rdmanet-daemon, faults injected round by round (internal/sim.Soak). Prints
# one summary line and the per-fault table; fails on any leak, duplicate,
# stranded VF, host difference, failed ADD or stuck DEL.
#   sudo make soak                       10,000 cycles (about 45 min on 2 cores)
#   sudo make soak SOAK_CYCLES=500       a short one
#   sudo make soak SOAK_SEED=123         replay the fault timing of a run
#   sudo make soak SOAK_FAULTS=state-full,storm
# The short soak (300 cycles, every fault at least once) runs in `make test`
# as TestSoak in test/e2e. SOAK_REPORT=<file> writes the JSON report.
#
# SOAK_TARGET=cluster: the real node (test/cluster: kubelet, containerd, the
# API server, rdmanet from its image) brought up, SOAK_ROUNDS rounds of
# SOAK_PODS exclusive pods with the daemon SIGKILLed and kubelet, containerd
# and kube-apiserver restarted, then taken down. One pass (7 rounds) runs in
# the cluster tier of `make test`.
SOAK_CYCLES ?= 10000
SOAK_TARGET ?= sim
SOAK_ROUNDS ?= 21
SOAK_PODS ?= 4

.PHONY: soak soak-sim soak-cluster
soak: soak-$(SOAK_TARGET)

soak-sim:
	set -o pipefail; SOAK_CYCLES=$(SOAK_CYCLES) RDMANET_REQUIRE_NETNS=1 $(GO) test -count=1 -timeout 8h -v -run '^TestSoak$$' ./test/e2e \
		| grep --line-buffered -E '^soak:|round [0-9]+: [0-9]+/|^[a-z-]+ +[0-9]+ +[0-9]|^fault |PROBLEM|^--- |^(ok|FAIL)|soak_test.go'

soak-cluster: cluster-bin
	@mkdir -p $(CURDIR)/_output
	set -o pipefail; RDMANET_CLUSTER_SOAK_ROUNDS=$(SOAK_ROUNDS) RDMANET_CLUSTER_SOAK_PODS=$(SOAK_PODS) \
	  RDMANET_CLUSTER_BIN=$(CLUSTER_BIN) RDMANET_CLUSTER_DIR=$(CLUSTER_DIR) \
	  $(GO) test -tags clustertest -count=1 -timeout 4h -v -run 'TestCluster/^fault_soak$$' ./test/cluster/ 2>&1 \
	  | tee $(CURDIR)/_output/soak-cluster.log | grep --line-buffered -E '^soak-cluster:|round [0-9]+:|^\s*--- |^(ok|FAIL)|Error|error'
