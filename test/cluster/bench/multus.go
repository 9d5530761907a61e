package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmanet/rdmanet/test/cluster"
)

// savedSuffix marks a node file the benchmark moved aside; the runtime's
// CNI config loader ignores it (not .conf/.conflist/.json). After an
// interrupted run, `mv X.rdmanet-bench-saved X` restores it.
const savedSuffix = ".rdmanet-bench-saved"

// CRDName is the CRD a Whereabouts manifest defines, from its file name
// (<group>_<plural>.yaml, as controller-gen writes them).
func CRDName(file string) (string, error) {
	base := strings.TrimSuffix(filepath.Base(file), ".yaml")
	group, plural, ok := strings.Cut(base, "_")
	if !ok || group == "" || plural == "" || strings.Contains(plural, "_") {
		return "", fmt.Errorf("CRD manifest %s: name is not <group>_<plural>.yaml", file)
	}
	return plural + "." + group, nil
}

// undo is a stack of node changes, undone newest first.
type undo struct{ steps []func() error }

func (u *undo) push(f func() error) { u.steps = append(u.steps, f) }

func (u *undo) run() error {
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		if err := u.steps[i](); err != nil {
			errs = append(errs, err)
		}
	}
	u.steps = nil
	return errors.Join(errs...)
}

// place writes data to path atomically; an existing file is moved aside
// first and put back by the undo step.
func (u *undo) place(path string, data []byte, mode os.FileMode) error {
	if err := u.moveAside(path); err != nil {
		return err
	}
	tmp := path + ".rdmanet-bench-tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("install %s: %w", path, err)
	}
	u.push(func() error {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	})
	return nil
}

// moveAside renames an existing path to path+savedSuffix and registers
// the rename back. A missing path is fine; a leftover saved copy (an
// interrupted run) is refused, since it may be the only copy.
func (u *undo) moveAside(path string) error {
	if _, err := os.Lstat(path); os.IsNotExist(err) {
		return nil
	}
	saved := path + savedSuffix
	if _, err := os.Lstat(saved); err == nil {
		return fmt.Errorf("%s exists (left by an interrupted bench-cluster run): restore it with mv %s %s, then rerun", saved, saved, path)
	}
	if err := os.Rename(path, saved); err != nil {
		return fmt.Errorf("move %s aside: %w", path, err)
	}
	u.push(func() error {
		if err := os.Rename(saved, path); err != nil {
			return fmt.Errorf("restore %s from %s: %w", path, saved, err)
		}
		return nil
	})
	return nil
}

// mkdir creates dir when missing and removes it (with what the benchmark
// put in it) at undo.
func (u *undo) mkdir(dir string, mode os.FileMode) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	u.push(func() error {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
		return nil
	})
	return nil
}

func (e *env) tool(set, name string) string {
	if set != "" {
		return set
	}
	return filepath.Join(e.l.Tools(), name)
}

// whereaboutsAPI installs what Whereabouts needs from the API server once
// for the run: its CRDs (only those missing). Cleanup removes what the run
// added: the CRDs it applied (their pools and reservations with them; for
// CRDs that were there before, the pools the run made), and the lease
// Whereabouts elects on in kube-system when it was not there before.
func (e *env) whereaboutsAPI(ctx context.Context) error {
	crds := e.cfg.WhereaboutsCRDs
	if crds == "" {
		crds = filepath.Join(e.l.Repo, ".tools", "whereabouts-crds")
	}
	files, _ := filepath.Glob(filepath.Join(crds, "*.yaml"))
	if len(files) == 0 {
		return fmt.Errorf("no Whereabouts CRDs in %s; fix: hack/build-whereabouts.sh (make whereabouts-tool)", crds)
	}
	u := &undo{}
	e.onCleanup(func(context.Context) error { return u.run() })
	for _, f := range files {
		name, err := CRDName(f)
		if err != nil {
			return err
		}
		if _, err := e.k.Output(ctx, "get", "crd", name); err == nil {
			e.logf("CRD %s already installed; keeping it", name)
			sweep, err := e.sweeper(ctx, name, "kube-system")
			if err != nil {
				return err
			}
			u.push(func() error { return sweep(context.Background()) })
			continue
		}
		if _, err := e.k.Output(ctx, "apply", "-f", f); err != nil {
			return err
		}
		u.push(func() error {
			_, err := e.k.Output(context.Background(), "delete", "crd", name, "--ignore-not-found", "--wait", "--timeout=120s")
			return err
		})
		if _, err := e.k.Output(ctx, "wait", "--for=condition=Established", "crd/"+name, "--timeout=60s"); err != nil {
			return err
		}
	}
	leases := e.cs.CoordinationV1().Leases("kube-system")
	if _, err := leases.Get(ctx, "whereabouts", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		u.push(func() error {
			err := leases.Delete(context.Background(), "whereabouts", metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete lease kube-system/whereabouts: %w", err)
			}
			return nil
		})
	}
	return nil
}

// useMultus makes the real Multus v4.2.3 thin plugin every node's CNI with
// upstream macvlan and Whereabouts v0.9.2 (instead of rdmanet and
// rdmanet-ipam, which the rdmanet installer also put in as "whereabouts"):
//
//   - /opt/cni/bin/multus and /opt/cni/bin/whereabouts (rdmanet's copy moved aside);
//   - /etc/cni/net.d/multus.d/multus.kubeconfig, whereabouts.d/{whereabouts.conf,whereabouts.kubeconfig}
//     (the admin identity, certificates embedded);
//   - /etc/cni/net.d/00-multus.conflist (what Multus' thin entrypoint makes
//     of the node's bridge network config, see MultusConf); 00-rdmanet.conf moved aside.
//
// The returned function (also registered for cleanup; a second call is a
// no-op) puts the nodes' files back as they were. Pods started under
// Multus must be gone before it runs (their DEL goes through Multus).
func (e *env) useMultus(ctx context.Context) (func(context.Context) error, error) {
	multus := e.tool(e.cfg.MultusBin, "multus")
	wb := e.tool(e.cfg.WhereaboutsBin, "whereabouts")
	for _, p := range []string{multus, wb} {
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("%s not built; fix: make multus-tool whereabouts-tool (hack/build-multus.sh, hack/build-whereabouts.sh)", p)
		}
	}
	ca, cerr := os.ReadFile(filepath.Join(e.l.PKI(), "ca.crt"))
	crt, terr := os.ReadFile(filepath.Join(e.l.PKI(), "admin.crt"))
	key, kerr := os.ReadFile(filepath.Join(e.l.PKI(), "admin.key"))
	if err := errors.Join(cerr, terr, kerr); err != nil {
		return nil, fmt.Errorf("admin identity for Multus and Whereabouts: %w", err)
	}
	kubeconfig := Kubeconfig(fmt.Sprintf("https://%s:%d", cluster.NodeIP, cluster.APIPort), ca, crt, key)

	u := &undo{}
	done := false
	restore := func(context.Context) error {
		if done {
			return nil
		}
		done = true
		err := u.run()
		// The runtime reloads its CNI config on the change.
		time.Sleep(2 * time.Second)
		return err
	}
	e.onCleanup(restore)
	fail := func(err error) (func(context.Context) error, error) {
		return nil, errors.Join(err, restore(ctx))
	}

	mb, err := os.ReadFile(multus)
	if err != nil {
		return fail(fmt.Errorf("read %s: %w", multus, err))
	}
	wbb, err := os.ReadFile(wb)
	if err != nil {
		return fail(fmt.Errorf("read %s: %w", wb, err))
	}
	wconf, err := WhereaboutsConf()
	if err != nil {
		return fail(err)
	}
	caches := map[string]string{}
	var mname string
	for _, n := range e.st.Nodes {
		// Host paths of the node's private mounts.
		bin := e.l.NodeDir(n, "opt/cni/bin")
		conf := e.l.NodeDir(n, "etc/cni/net.d")
		cniState := e.l.NodeDir(n, MultusCNIDir)
		master, err := MasterConfig(conf, cluster.ClusterNetwork)
		if err != nil {
			return fail(fmt.Errorf("node %s: %w", n.Name, err))
		}
		name, mconf, err := MultusConf(master)
		if err != nil {
			return fail(fmt.Errorf("node %s: %w", n.Name, err))
		}
		steps := []func() error{
			func() error { return u.mkdir(cniState, 0o755) }, // removed at undo: Multus' per-sandbox cache
			func() error { return u.place(filepath.Join(bin, "multus"), mb, 0o755) },
			func() error { return u.place(filepath.Join(bin, "whereabouts"), wbb, 0o755) },
			func() error { return u.mkdir(filepath.Join(conf, "multus.d"), 0o700) },
			func() error {
				return u.place(filepath.Join(conf, strings.TrimPrefix(MultusKubeconfig, "/etc/cni/net.d/")), kubeconfig, 0o600)
			},
			func() error { return u.mkdir(filepath.Join(conf, "whereabouts.d"), 0o700) },
			func() error {
				return u.place(filepath.Join(conf, strings.TrimPrefix(WhereaboutsKubeconfig, "/etc/cni/net.d/")), kubeconfig, 0o600)
			},
			func() error { return u.place(filepath.Join(conf, WhereaboutsFlatConf), wconf, 0o644) },
			func() error { return u.place(filepath.Join(conf, name), mconf, 0o644) },
			func() error { return u.moveAside(filepath.Join(conf, RdmanetConfFile)) },
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return fail(fmt.Errorf("node %s: %w", n.Name, err))
			}
		}
		caches[n.Name], mname = cniState, name
	}
	// The runtime reloads its CNI config on the change; each Multus batch
	// then proves Multus served it on every node (its cache dirs have entries).
	time.Sleep(2 * time.Second)
	e.multusCaches, e.multusConf = caches, mname
	return restore, nil
}

// multusServed reports whether Multus cached at least one sandbox (its
// cniDir has an entry): proof the runtime called Multus, not rdmanet.
func multusServed(dir string) bool {
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) > 0
}

// MasterConfig is the config file in confDir whose network name is name
// (the cluster network Multus delegates to; Multus' thin entrypoint calls
// it the master plugin config).
func MasterConfig(confDir, name string) ([]byte, error) {
	var files []string
	for _, pat := range []string{"*.conf", "*.conflist", "*.json"} {
		m, _ := filepath.Glob(filepath.Join(confDir, pat))
		files = append(files, m...)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		var c struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(b, &c) == nil && c.Name == name {
			return b, nil
		}
	}
	return nil, fmt.Errorf("no CNI config named %q in %s (files %v)", name, confDir, files)
}
