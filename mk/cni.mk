# CNI data plane (issue 2): the sriov and rdma plugins (built from ./cmd/ by
# `build`), the upstream plugins the project installs unchanged, the netns
# test tier and the chain benchmark.
#
# Upstream macvlan and host-local are `package main` in containernetworking/plugins
# and cannot be imported by a 3-line main, so they are built from the module here.
CNI_UPSTREAM_PLUGINS := \
	github.com/containernetworking/plugins/plugins/main/macvlan \
	github.com/containernetworking/plugins/plugins/ipam/host-local

.PHONY: cni-plugins test-cni bench-cni

build:: cni-plugins

cni-plugins:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(CNI_UPSTREAM_PLUGINS)

# Unit + real-netns tests of the data plane (root; CI is root). The plugins
# the tests exec are built with -tags rdmanet_testhooks by test/pluginbin.
test-cni:
	RDMANET_REQUIRE_NETNS=1 $(GO) test -count=1 ./internal/netops/... ./internal/cni/sriov/... ./internal/cni/rdma/... ./internal/cni/verbs/... ./internal/cni/confkeys/... ./internal/cni/cniconf/... ./internal/cni/conftest/... ./internal/cni/ibsriov/... ./internal/cni/ipoib/... ./internal/inventory/... ./test/tier/... ./test/netnsutil/... ./test/cni/...

# ADD/DEL p50/p99 of sriov+rdma+IPAM over 200 runs on a simulated VF, and
# 64 parallel ADDs' wall time; then the seed chain per call, as thin clients
# of the daemon and in-process (TestBenchChainForwarded: the forwarding cost).
# RDMANET_BENCH_RUNS=N changes the run count.
bench-cni:
	set -o pipefail; RDMANET_BENCH=1 $(GO) test -count=1 -timeout 30m -v -run '^TestBenchChain(Forwarded)?$$' ./test/cni | grep -E '^cni-bench:|^--- |^(ok|FAIL)'

# What a thin CNI binary (sriov, rdma, rdmanet-ipam) costs per call, exec'd
# from a Go process as a runtime does: through a real rdmanet-daemon, and
# without one (it execs its -direct binary); /bin/true as the floor. Built
# static as the image ships them. One forward-bench line per binary and path.
BENCH_FORWARD_BIN := $(CURDIR)/_output/bench-forward/bin
.PHONY: bench-forward
bench-forward:
	@mkdir -p $(BENCH_FORWARD_BIN)
	GOFLAGS=-buildvcs=true CGO_ENABLED=0 $(GO) build -trimpath $(GO_BUILD_FLAGS) -o $(BENCH_FORWARD_BIN)/ \
	  ./cmd/sriov ./cmd/sriov-direct ./cmd/rdma ./cmd/rdma-direct ./cmd/rdmanet-ipam ./cmd/rdmanet-ipam-direct ./cmd/rdmanet-daemon
	$(GO) run ./test/bench/forward -bin $(BENCH_FORWARD_BIN) $(BENCH_FORWARD_FLAGS)
