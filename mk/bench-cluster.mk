# Pod start on the real multi-node cluster (issues 12 and 26, "Measured"):
# creation -> Running with net1 for batches of 48 pods created at once and
# spread evenly over three nodes, five runs in one invocation, per row:
# plain pods (the cluster network only), rdmanet exclusive (a VF each),
# rdmanet shared (macvlan over the shared HCA + rdmanet-ipam), and the same
# shared pods with the real Multus v4.2.3 thin plugin + upstream macvlan +
# Whereabouts v0.9.2 as every node's CNI instead of rdmanet. The goal
# (rdmanet's added time under a third of Multus + Whereabouts') is judged
# in every run (test/cluster/bench, docs in its package comment). Root.
#
#   sudo make bench-cluster                                   figures to stdout and _output/bench-cluster.txt
#   sudo make bench-cluster BENCH_CLUSTER_FLAGS='--batches 3 --rows plain,shared,multus'
#   sudo make bench-cluster BENCH_CLUSTER_NODES=1 BENCH_CLUSTER_FLAGS='--pods 16'   the single-node figures
#
# A cluster already running in $(CLUSTER_DIR) is used (whatever its node
# count) and left running. With none running, the target starts one of
# BENCH_CLUSTER_NODES nodes (make cluster-up) and takes it down again
# afterwards (make cluster-down's checks included); BENCH_CLUSTER_KEEP=1
# leaves that one running. The run changes the nodes only while it lasts
# (their simulated kernels' RDMA netns mode per phase, the CNI config for
# the Multus row) and puts everything back, also when it fails or is
# interrupted.
BENCH_CLUSTER_FLAGS ?=
BENCH_CLUSTER_KEEP ?=
BENCH_CLUSTER_NODES ?= 3
BENCH_CLUSTER_BIN := $(CURDIR)/_output/bin/rdmanet-bench-cluster

.PHONY: whereabouts-tool bench-cluster-bin

# The real Whereabouts v0.9.2 into $(TOOLS_BIN)/whereabouts and its CRDs into
# .tools/whereabouts-crds; only the benchmarks need it, `make test` does not.
whereabouts-tool:
	hack/build-whereabouts.sh

bench-cluster-bin:
	@mkdir -p $(dir $(BENCH_CLUSTER_BIN))
	$(GO) build -o $(BENCH_CLUSTER_BIN) ./test/cluster/bench/cmd/rdmanet-bench-cluster

bench-cluster: cluster-bin bench-cluster-bin multus-tool whereabouts-tool
	@mkdir -p $(CURDIR)/_output
	@started=0; \
	if ! $(CLUSTER_BIN) status --state-dir $(CLUSTER_DIR) --repo $(CURDIR) >/dev/null 2>&1; then \
	  echo "bench-cluster: no cluster running in $(CLUSTER_DIR): starting one of $(BENCH_CLUSTER_NODES) nodes (cluster-down afterwards; BENCH_CLUSTER_KEEP=1 keeps it)"; \
	  $(CLUSTER_BIN) up --state-dir $(CLUSTER_DIR) --repo $(CURDIR) --nodes $(BENCH_CLUSTER_NODES) || exit 1; \
	  started=1; \
	fi; \
	$(BENCH_CLUSTER_BIN) --state-dir $(CLUSTER_DIR) --repo $(CURDIR) $(BENCH_CLUSTER_FLAGS) 2>&1 | tee $(CURDIR)/_output/bench-cluster.txt; \
	rc=$${PIPESTATUS[0]}; \
	if [ $$started = 1 ] && [ "$(BENCH_CLUSTER_KEEP)" != 1 ]; then \
	  $(CLUSTER_BIN) down --state-dir $(CLUSTER_DIR) --repo $(CURDIR) || rc=1; \
	fi; \
	exit $$rc
