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
BENCH_FLEET_FLAGS ?= -nodes=1000,2000 -addresses=50000,100000 -steady=3m -pods=1000
BENCH_FLEET_BIN := $(CURDIR)/_output/bench-fleet/bin

.PHONY: bench-fleet
bench-fleet: k8s-tools
	@mkdir -p $(BENCH_FLEET_BIN)
	$(GO) build $(GO_BUILD_FLAGS) -o $(BENCH_FLEET_BIN)/ ./cmd/rdmanet-controller ./test/fleetbench/cmd/bench-fleet
	@set -o pipefail; ulimit -n 65536 2>/dev/null || true; \
	nice -n 15 $(BENCH_FLEET_BIN)/bench-fleet -controller-bin $(BENCH_FLEET_BIN)/rdmanet-controller $(BENCH_FLEET_FLAGS) | tee $(CURDIR)/_output/bench-fleet.txt
