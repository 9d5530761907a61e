# Simulated-node demo (issue 3): `sudo make demo` builds every binary the
# demo execs into bin/ (rdmanet, rdmanet-direct, sriov, rdma, rdmanet-ipam
# from ./cmd/ by `build`; macvlan and host-local by `cni-plugins`; the
# upstream bridge for the pods' default network here) and runs
# `kubectl rdma demo` on them. DEMO_FLAGS passes flags, e.g.
#   sudo make demo DEMO_FLAGS='--pods 8 -o json'
#   sudo make demo DEMO_FLAGS=--keep   then   sudo bin/kubectl-rdma demo --cleanup
DEMO_UPSTREAM_PLUGINS := github.com/containernetworking/plugins/plugins/main/bridge
DEMO_FLAGS ?=

.PHONY: demo demo-bin test-demo

demo-bin: build
	$(GO) build -o $(BIN)/ $(DEMO_UPSTREAM_PLUGINS)

demo: demo-bin
	$(BIN)/kubectl-rdma demo --bin-dir $(BIN) $(DEMO_FLAGS)

# The end-to-end test alone (root): all three modes, 8 pods each, two rounds.
test-demo:
	RDMANET_REQUIRE_NETNS=1 $(GO) test -count=1 -v -run '^TestDemo' ./test/e2e/ ./internal/sim/
