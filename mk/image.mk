# Images (issues 12, 31), built without a container daemon by internal/image
# over go-containerregistry (hack/rdmanet-image). Each prints one line:
# reference, digest, size, archive.
#   make image          rdmanet/rdmanet:$(VERSION)      production: static binaries of ./cmd/... in /opt/rdmanet/bin, no shell;
#                       one OCI image index, linux/amd64 + linux/arm64 (IMAGE_ARCHES), as an OCI image layout archive
#                       _output/image/rdmanet-$(VERSION).oci.tar: `ctr -n k8s.io images import --all-platforms FILE`,
#                       `docker load -i FILE` (Docker 25+), `skopeo copy --all oci-archive:FILE docker://REG/rdmanet/rdmanet:TAG`,
#                       or `tar -xf FILE -C DIR && crane push --index DIR REF` (docs/release.md). Each architecture's
#                       static binaries stay in _output/image/stage/rdmanet-$(VERSION)-linux-<arch>/.
# The other three are docker-save style archives of this machine's architecture
# (`ctr -n k8s.io images import FILE`, `docker load -i FILE`, `crane push FILE REF`):
#   make image-sim      rdmanet/rdmanet:$(VERSION)-sim  simulated-node variant: -tags rdmanet_testhooks (never for production)
#   make image-pause    localhost/pause:rdmanet         the real-node harness's pod sandbox (test/images/pause)
#   make image-testbox  localhost/testbox:latest        Debian busybox-static with applets (apt-get install -y busybox-static)
# SOURCE_DATE_EPOCH sets every timestamp (default 0): the same tree gives the same digest.
IMAGE_OUT ?= $(CURDIR)/_output/image
IMAGE_ARCHES ?= amd64,arm64
RDMANET_IMAGE = $(GO) run ./hack/rdmanet-image --out $(IMAGE_OUT) --arches $(IMAGE_ARCHES)

.PHONY: image image-sim image-pause image-testbox images test-image

image:
	@$(RDMANET_IMAGE) rdmanet

image-sim:
	@$(RDMANET_IMAGE) sim

image-pause:
	@$(RDMANET_IMAGE) pause

image-testbox:
	@$(RDMANET_IMAGE) testbox

images:
	@$(RDMANET_IMAGE) rdmanet sim pause testbox

# The image, installer and pause tests alone.
test-image:
	$(GO) test -count=1 ./internal/image/... ./internal/install/... ./internal/version/... ./test/images/...

# Debian packages the tests need (busybox-static for the testbox image),
# installed when missing so a fresh machine's `make test` needs nothing by hand.
.PHONY: test-debs
test-debs:
	hack/install-debs.sh

test-prereqs:: test-debs
