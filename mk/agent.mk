# Node agent (issue 7): benchmarks on a fixture of 8 PFs x 64 VFs (512 VFs in
# one exclusive pool): full discovery, Allocate latency over gRPC, and health
# propagation from a PF link change to the ListAndWatch update.
# The kubelet tier (real kubelet device manager) is the test/kubelet module,
# run by hack/test.sh like every test/*/go.mod module.
BENCH_AGENT_TIME ?= 2s
# each health measurement is one link flip and takes about a rescan or two
BENCH_AGENT_HEALTH_FLIPS ?= 6x

.PHONY: bench-agent test-kubelet
bench-agent:
	$(GO) test -run '^$$' -bench 'Discovery|Allocate' -benchmem -benchtime $(BENCH_AGENT_TIME) -count 1 ./internal/agent/
	$(GO) test -run '^$$' -bench 'HealthPropagation' -benchtime $(BENCH_AGENT_HEALTH_FLIPS) -count 1 ./internal/agent/

# The kubelet device manager tier alone (root: it uses a private mount
# namespace; without root it fails here, as in CI, instead of skipping).
test-kubelet:
	cd test/kubelet && RDMANET_REQUIRE_NETNS=1 $(GO) test -count=1 -v ./...
