# Attachment burst (issue 32, item 1): N pods × M networks attached at once
# on the simulated node through rdmanet-daemon + the rdmanet shim, and through
# Multus v4.3.0 thick (multus-daemon + multus-shim, hack/build-multus-thick.sh)
# with the same delegates, on the real kube-apiserver + etcd, in one run
# (test/burstbench, docs/benchmarks.md "Attachment burst"). Prints one
# bench-burst line per row (the median of the runs) and one bench-burst-spread
# line (min–max); the full output goes to _output/bench-burst.txt. Root.
#
#   sudo make bench-burst
#   sudo make bench-burst BENCH_BURST_FLAGS='-burst.pods=64,128,256,512 -burst.rails=1,4,8 -burst.runs=3'
#
# The default list stops at 256 pods: on the 2-core machine one 512-pod row
# takes minutes per impl and run (docs/benchmarks.md).
BENCH_BURST_FLAGS ?=

.PHONY: bench-burst multus-thick-tool test-burst-smoke
# The real Multus thick plugin (v4.3.0) into $(TOOLS_BIN); only this
# benchmark needs it, `make test` does not.
multus-thick-tool:
	hack/build-multus-thick.sh

bench-burst: k8s-tools multus-thick-tool
	@mkdir -p _output
	set -o pipefail; RDMANET_BENCH=1 $(GO) test -tags burstbench -count=1 -timeout 300m -v -run '^TestBurst$$' ./test/burstbench/ -args $(BENCH_BURST_FLAGS) 2>&1 \
	  | tee _output/bench-burst.txt | grep -E '^bench-burst|^--- |^(ok|FAIL)'

# The harness' smoke test (root): 4 pods x 1 rail through each impl, once.
# Not in `make test`: it needs Multus thick (a 15-minute cold build).
test-burst-smoke: k8s-tools multus-thick-tool
	$(GO) test -tags burstbench -count=1 -v -run '^TestBurstSmoke$$' ./test/burstbench/
