package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ServerMinor is the Kubernetes minor the node runs; kubectl is supported
// within one minor of it.
const ServerMinor = 37

// kubectl picks kubectl from PATH when its version is within the supported
// skew, and otherwise builds v1.37.2 into the tools dir and says so.
func (l Layout) kubectl(ctx context.Context, out io.Writer) (string, error) {
	if p, err := exec.LookPath("kubectl"); err == nil {
		if minor, err := kubectlMinor(ctx, p); err == nil && minor >= ServerMinor-1 && minor <= ServerMinor+1 {
			fmt.Fprintf(out, "cluster-up: using %s (v1.%d, within the supported skew of v1.%d)\n", p, minor, ServerMinor)
			return p, nil
		} else if err == nil {
			fmt.Fprintf(out, "cluster-up: %s is v1.%d, outside the supported skew (v1.%d-v1.%d): building kubectl v1.37.2 into %s\n",
				p, minor, ServerMinor-1, ServerMinor+1, l.Tools())
		}
	} else {
		fmt.Fprintf(out, "cluster-up: no kubectl on PATH: building kubectl v1.37.2 into %s\n", l.Tools())
	}
	if err := l.runHost(ctx, out, filepath.Join(l.Repo, "hack/build-k8s-tools.sh"), "kubectl"); err != nil {
		return "", err
	}
	return filepath.Join(l.Tools(), "kubectl"), nil
}

func kubectlMinor(ctx context.Context, path string) (int, error) {
	b, err := exec.CommandContext(ctx, path, "version", "--client", "-o", "json").Output()
	if err != nil {
		return 0, err
	}
	var v struct {
		ClientVersion struct {
			Major, Minor string
		} `json:"clientVersion"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, err
	}
	if v.ClientVersion.Major != "1" {
		return 0, fmt.Errorf("kubectl major %q", v.ClientVersion.Major)
	}
	return strconv.Atoi(strings.TrimRight(v.ClientVersion.Minor, "+"))
}

// Kubectl runs kubectl against the cluster from the machine's shell.
type Kubectl struct {
	Path       string
	Kubeconfig string
}

func (l Layout) Kubectl(st State) Kubectl {
	return Kubectl{Path: st.Kubectl, Kubeconfig: st.Kubeconfig}
}

// Output runs kubectl and returns stdout; stderr is in the error.
func (k Kubectl) Output(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, k.Path, append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (k Kubectl) run(ctx context.Context, out io.Writer, args ...string) error {
	s, err := k.Output(ctx, args...)
	if s != "" {
		for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
			fmt.Fprintf(out, "  %s\n", line)
		}
	}
	return err
}

// Apply pipes a manifest into kubectl apply -f -.
func (k Kubectl) Apply(ctx context.Context, manifest string) error {
	_, err := k.ApplyArgs(ctx, manifest)
	return err
}

// ApplyArgs pipes a manifest into kubectl apply -f - with extra flags
// (e.g. --dry-run=server) and returns what kubectl wrote to stderr (the
// API server's admission warnings) even when it succeeds.
func (k Kubectl) ApplyArgs(ctx context.Context, manifest string, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, k.Path, append([]string{"--kubeconfig", k.Kubeconfig, "apply", "-f", "-"}, args...)...)
	cmd.Stdin = strings.NewReader(manifest)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stderr.String(), fmt.Errorf("kubectl apply: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stderr.String(), nil
}
