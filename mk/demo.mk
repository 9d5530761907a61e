# Simulated-node demo (issue 3): `sudo make demo` builds every binary the
# demo execs (rdmanet, rdmanet-direct, sriov, rdma, rdmanet-ipam, ib-sriov,
# ipoib, kubectl-rdma from ./cmd/; the upstream macvlan, host-local and
# bridge) into $(DEMO_BIN) = bin/testhooks/ and runs `kubectl rdma demo` on
# them: the RoCE modes (exclusive, shared, host) on two simulated nodes and
# the InfiniBand variants (issue 28) on two simulated IB nodes: ib-sriov-cni's
# NAD (GUIDs from the node's GUID pool, PKey 0x8005) and ipoib-cni's NAD
# (IPoIB children of the shared port). The IB nodes double the demo's own
# time (13.6 s -> 29.1 s wall, mean of two runs each), small next to the
# build. DEMO_MODES picks the modes:
#   sudo make demo DEMO_MODES=exclusive,shared,host   RoCE only
#   sudo make demo-ib                                  InfiniBand only
#
# Those builds carry the Go build tag rdmanet_testhooks: this machine has no
# SR-IOV and no RDMA subsystem, so the demo's plugins run with
# RDMANET_NETOPS=record (the recording fake), a test switch that production
# builds (bin/, `make build`) refuse. Never install bin/testhooks/ on a node.
# DEMO_FLAGS passes flags, e.g.
#   sudo make demo DEMO_FLAGS='--pods 8 -o json'
#   sudo make demo DEMO_FLAGS=--keep   then   sudo bin/testhooks/kubectl-rdma demo --cleanup
DEMO_UPSTREAM_PLUGINS := github.com/containernetworking/plugins/plugins/main/bridge
DEMO_FLAGS ?=
DEMO_MODES ?= exclusive,shared,host,ib-exclusive,ib-shared
TESTHOOKS_TAG := rdmanet_testhooks
DEMO_BIN ?= $(BIN)/testhooks

.PHONY: demo demo-ib demo-bin test-demo

# One `go build`, so every rdmanet binary there has the same build settings
# (the daemon runs its own plugins in-process only then).
demo-bin:
	@mkdir -p $(DEMO_BIN)
	$(GO) build -tags $(TESTHOOKS_TAG) -o $(DEMO_BIN)/ ./cmd/... $(CNI_UPSTREAM_PLUGINS) $(DEMO_UPSTREAM_PLUGINS)

demo: demo-bin
	$(DEMO_BIN)/kubectl-rdma demo --bin-dir $(DEMO_BIN) --mode $(DEMO_MODES) $(DEMO_FLAGS)

demo-ib: demo-bin
	$(DEMO_BIN)/kubectl-rdma demo --bin-dir $(DEMO_BIN) --mode ib-exclusive,ib-shared $(DEMO_FLAGS)

# The end-to-end tests alone (root): the three RoCE modes, 8 pods each, two
# rounds; the two IB modes, 3 pods each, two rounds (TestDemoInfiniBand).
# (test/pluginbin builds the plugins with the tag itself.)
test-demo:
	RDMANET_REQUIRE_NETNS=1 $(GO) test -count=1 -v -run '^TestDemo' ./test/e2e/ ./internal/sim/
