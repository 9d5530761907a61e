# Fleet API cost (issue 32, "Thousands of nodes by simulation"): 1,000 and
# 2,000 simulated nodes, each running rdmanet's real node-side API code as
# goroutines with its own bound token (the DRA ResourceSlice publisher with
# its device-plugin in-use taints, the agent's Node annotation, the daemon's
# pod/NAD informers and ResourceSlice lookups, rdmanet-ipam's allocator over
# IPAMBlocks), 8 NICs x 16 VFs each, against one real kube-apiserver + etcd
# (test/apiserver, with the node-restriction policies and RBAC of deploy/).
# Phases per size: steady state, one device health flap, a 1,000-pod job
# start, then rdmanet-controller (the real binary, its own process) with
# 50,000 / 100,000 allocated addresses: RSS and the release of a dead node's
# addresses. Progress and breakdowns (by verb and resource) on stderr, ONE
# bench-fleet line per size on stdout (test/fleetbench, docs/benchmarks.md).
#
#   make bench-fleet
#   make bench-fleet BENCH_FLEET_FLAGS='-nodes=1000 -addresses=50000 -steady=2m'
#
# The simulator's Go heap is capped softly at BENCH_FLEET_MEMORY_LIMIT_MIB
# (its runtime memory limit; the API server, etcd and the controller it
# starts are not capped): a simulated node holds about 2.5 MB live, and
# without a cap the garbage collector lets the process grow to twice that,
# which at 2,000 nodes crowds the API server out of the machine's 24 GiB.
BENCH_FLEET_FLAGS ?= -nodes=1000,2000 -addresses=50000,100000 -steady=3m -pods=1000
BENCH_FLEET_MEMORY_LIMIT_MIB ?= 10240
BENCH_FLEET_BIN := $(CURDIR)/_output/bench-fleet/bin

.PHONY: bench-fleet
bench-fleet: k8s-tools
	@mkdir -p $(BENCH_FLEET_BIN)
	$(GO) build $(GO_BUILD_FLAGS) -o $(BENCH_FLEET_BIN)/ ./cmd/rdmanet-controller ./test/fleetbench/cmd/bench-fleet
	@set -o pipefail; ulimit -n 65536 2>/dev/null || true; \
	nice -n 15 $(BENCH_FLEET_BIN)/bench-fleet -controller-bin $(BENCH_FLEET_BIN)/rdmanet-controller -memory-limit-mib=$(BENCH_FLEET_MEMORY_LIMIT_MIB) $(BENCH_FLEET_FLAGS) | tee $(CURDIR)/_output/bench-fleet.txt
