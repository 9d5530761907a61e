//go:build releasetest

package release

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/chart"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// TestReleaseReproducibleAndKrew (make test-release): Build twice (two
// commands, to keep it short; make release-check does all of them) gives
// the same bytes in every file; SHA256SUMS lists them; the chart archive
// loads and lints; krew (built from its module, .tools/bin/krew) installs
// the generated manifest offline from this machine's archive, and the
// installed kubectl-rdma runs.
func TestReleaseReproducibleAndKrew(t *testing.T) {
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(root, ".tools", "bin")
	for _, b := range []string{"cyclonedx-gomod", "krew"} {
		if _, err := os.Stat(filepath.Join(tools, b)); err != nil {
			t.Fatalf("%v: build it with hack/build-release-tools.sh (make release-tools)", err)
		}
	}
	var outs []string
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "release")
		_, err := Build(context.Background(), Options{Dir: root, Out: out, Work: t.TempDir(), Version: "9.8.7", Created: time.Unix(1700000000, 0),
			CycloneDXGomod: filepath.Join(tools, "cyclonedx-gomod"), Packages: []string{"./cmd/kubectl-rdma", "./cmd/rdmanet-install"}})
		if err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		outs = append(outs, out)
	}
	sums, err := os.ReadFile(filepath.Join(outs[0], "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(outs[0])
	if n := strings.Count(string(sums), "\n"); n != len(ents)-1 || n < 9 {
		t.Fatalf("SHA256SUMS lists %d files, the release has %d:\n%s", n, len(ents), sums)
	}
	for _, e := range ents {
		a, _ := os.ReadFile(filepath.Join(outs[0], e.Name()))
		b, err := os.ReadFile(filepath.Join(outs[1], e.Name()))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds (%v)", e.Name(), err)
		}
	}
	if err := chart.Lint(filepath.Join(outs[0], "rdmanet-0.2.0.tgz"), nil); err != nil {
		t.Error(err)
	}
	sbom, _ := os.ReadFile(filepath.Join(outs[0], "rdmanet-image-9.8.7-linux-arm64.cdx.json"))
	if !bytes.Contains(sbom, []byte(`"bomFormat": "CycloneDX"`)) || !bytes.Contains(sbom, []byte("k8s.io/client-go")) {
		t.Errorf("SBOM is not a CycloneDX BOM of the module:\n%.500s", sbom)
	}
	krewRoot := t.TempDir()
	cmd := exec.Command(filepath.Join(tools, "krew"), "install", "--manifest="+filepath.Join(outs[0], "kubectl-rdma.krew.yaml"),
		"--archive="+filepath.Join(outs[0], "kubectl-rdma-9.8.7-linux-"+runtime.GOARCH+".tar.gz"))
	cmd.Env = append(os.Environ(), "KREW_ROOT="+krewRoot)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("krew install --manifest --archive: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(krewRoot, "bin", "kubectl-rdma"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "9.8.7") {
		t.Fatalf("kubectl-rdma installed by krew --version: %v %s", err, out)
	}
}
