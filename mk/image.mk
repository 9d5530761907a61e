# Images (issue 12), built without a container daemon by internal/image over
# go-containerregistry (hack/rdmanet-image). Each prints one line: reference,
# digest, image ID, size, archive. The archives are docker-save style:
# `ctr -n k8s.io images import FILE`, `docker load -i FILE`, `crane push FILE REF`.
#   make image          rdmanet/rdmanet:$(VERSION)      production: static binaries of ./cmd/... in /opt/rdmanet/bin, no shell
#   make image-sim      rdmanet/rdmanet:$(VERSION)-sim  simulated-node variant: -tags rdmanet_testhooks (never for production)
#   make image-pause    localhost/pause:rdmanet         the real-node harness's pod sandbox (test/images/pause)
#   make image-testbox  localhost/testbox:latest        Debian busybox-static with applets (apt-get install -y busybox-static)
# SOURCE_DATE_EPOCH sets every timestamp (default 0): the same tree gives the same digest.
IMAGE_OUT ?= $(CURDIR)/_output/image
RDMANET_IMAGE = $(GO) run ./hack/rdmanet-image --out $(IMAGE_OUT)

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
