# Hardening (issue 15, docs/security.md): fuzzing and govulncheck.

.PHONY: fuzz vulncheck

# Every fuzz target of the main module for FUZZTIME each (`go test` runs
# their seed corpora already). FUZZ_MATCH=<regexp> picks targets.
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

# govulncheck ./... against an offline database built from the
# golang.org/x/vulndb module (tools and database cached in .tools/).
vulncheck:
	hack/vulncheck.sh
