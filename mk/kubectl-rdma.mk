# kubectl-rdma (issue 4): lint / nccl / render (doctor, demo, ipam gc are added
# by their owners as cmd/kubectl-rdma/<name>.go registering with register()).
# The binary itself is built by the top-level `build` (./cmd/...).
KUBECTL_RDMA_PKGS := ./cmd/kubectl-rdma/ ./internal/manifest/ ./internal/lint/ ./internal/nccl/ ./internal/render/ ./internal/doctor/
FUZZTIME ?= 30s

.PHONY: test-kubectl-rdma fuzz-kubectl-rdma golden-kubectl-rdma roundtrip-kubectl-rdma

test-kubectl-rdma:
	$(GO) test -count=1 $(KUBECTL_RDMA_PKGS)

# Each fuzz target for FUZZTIME (the seed corpora also run in plain `go test`).
fuzz-kubectl-rdma:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/manifest/
	$(GO) test -run '^$$' -fuzz '^FuzzLint$$' -fuzztime $(FUZZTIME) ./internal/lint/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/nccl/

# Rewrite the lint golden files, docs/lint-rules.md and the render goldens
# after an intended change; review the diff before committing.
golden-kubectl-rdma:
	$(GO) test -count=1 ./internal/lint/ -run 'TestSeedGolden|TestRuleCatalogueDoc' -update
	$(GO) test -count=1 ./internal/render/ -run 'TestGolden' -update

# render every mode and lint it with the built binary (exit 1 on any error).
roundtrip-kubectl-rdma: build
	@set -e; for m in exclusive shared host; do \
	  echo "== $$m"; \
	  $(BIN)/kubectl-rdma render --mode $$m --name rt-$$m --pf enp65s0f0np0 --subnet 10.60.0.0/16 \
	    --image registry.example.com/train:v1 | $(BIN)/kubectl-rdma lint -; \
	done
