# Meta CNI benchmark: ADD latency per call and through the daemon, against
# the real API server on the simulated node (root; builds the k8s tools first).
.PHONY: bench-meta
bench-meta: k8s-tools
	@mkdir -p _output
	go test -count=1 -run XXX -bench 'BenchmarkMetaAdd' -benchtime 200x -timeout 60m ./test/e2e/ | tee _output/bench-meta.txt | grep -E 'meta-bench|^Benchmark'
	go test -count=1 -run XXX -bench 'BenchmarkMetaParallel64' -benchtime 3x -timeout 60m ./test/e2e/ | tee -a _output/bench-meta.txt | grep -E 'meta-bench|^Benchmark'
