# Release packaging (issue 31; docs/release.md).
#
#   make smoke-arm64    the arm64 build of every binary run under user-mode
#                       emulation (qemu-aarch64-static: hack/install-debs.sh
#                       installs qemu-user-static): --version, --help,
#                       kubectl rdma lint of the seeds and rdmanet-agent
#                       --once on the sysfs fixture, compared with this
#                       machine's build (test/crossarch). Fails without qemu.
#   make release        _output/release/: per-architecture archives of every
#                       binary, kubectl-rdma's krew archives and manifest, the
#                       image index archive, the chart, an SBOM per image
#                       (cyclonedx-gomod), SHA256SUMS. Reproducible:
#                       SOURCE_DATE_EPOCH (default: the last commit's time).
#   make release-check  make release twice into two directories and compare
#                       every byte (the reproducibility test).
RELEASE_OUT ?= $(CURDIR)/_output/release
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
CYCLONEDX_GOMOD := $(CURDIR)/.tools/bin/cyclonedx-gomod

.PHONY: smoke-arm64 release release-check release-tools test-release

smoke-arm64: test-debs
	$(GO) test -tags crossarch -count=1 -timeout 30m -v ./test/crossarch/

# cyclonedx-gomod, built from its module into .tools/bin (never committed).
release-tools:
	GO=$(GO) hack/build-release-tools.sh

release: release-tools
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./hack/rdmanet-release --out $(RELEASE_OUT) --cyclonedx-gomod $(CYCLONEDX_GOMOD)

release-check: release-tools
	rm -rf $(RELEASE_OUT)-a $(RELEASE_OUT)-b
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./hack/rdmanet-release --out $(RELEASE_OUT)-a --cyclonedx-gomod $(CYCLONEDX_GOMOD)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./hack/rdmanet-release --out $(RELEASE_OUT)-b --cyclonedx-gomod $(CYCLONEDX_GOMOD) --work $(CURDIR)/_output/release-work-b
	diff -r $(RELEASE_OUT)-a $(RELEASE_OUT)-b
	@echo "release-check: two builds are byte for byte the same: $$(cat $(RELEASE_OUT)-a/SHA256SUMS | wc -l) files"

# The release tests: two release builds (two commands) give the same bytes,
# krew installs the generated manifest offline from the archive.
test-release: release-tools
	$(GO) test -tags releasetest -count=1 -timeout 30m -v ./internal/release/
