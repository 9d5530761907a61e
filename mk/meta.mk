# Meta CNI benchmark: ADD latency of the real Multus thin plugin and of
# rdmanet (per call, through the daemon, daemon with concurrentNetworks) on the
# same chains, against the real API server on the simulated node (root; builds
# the k8s tools and Multus first). Prints the meta-bench lines, incl. one
# speedup line per chain, and keeps the full output in _output/bench-meta.txt.
BENCH_META_TIME ?= 200x
BENCH_META_PAR_TIME ?= 3x

.PHONY: bench-meta multus-tool
# The real Multus thin plugin (v4.2.3) into $(TOOLS_BIN)/multus; only the
# benchmark needs it, `make test` does not.
multus-tool:
	hack/build-multus.sh

bench-meta: k8s-tools multus-tool
	@mkdir -p _output
	set -o pipefail; $(GO) test -count=1 -run XXX -bench 'BenchmarkMetaAdd' -benchtime $(BENCH_META_TIME) -timeout 120m ./test/e2e/ | tee _output/bench-meta.txt | grep -E 'meta-bench|^Benchmark|^(ok|FAIL)'
	set -o pipefail; $(GO) test -count=1 -run XXX -bench 'BenchmarkMetaParallel64' -benchtime $(BENCH_META_PAR_TIME) -timeout 60m ./test/e2e/ | tee -a _output/bench-meta.txt | grep -E 'meta-bench|^Benchmark|^(ok|FAIL)'
