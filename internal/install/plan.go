package install

// Install's plan: the options checked, and every file to write listed with
// its mode and its content's hash, each input read and checked before
// anything is written.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// planned is one file to write: where, its mode, where its bytes come from.
type planned struct {
	entry Entry
	mode  os.FileMode
	// read returns the content; src names it in errors and logs.
	read func() ([]byte, error)
	src  string
}

func (o *Options) validate() error {
	for _, p := range []struct{ flag, v string }{{"--src-dir", o.SrcDir}, {"--cni-bin-dir", o.CNIBinDir}, {"--cni-conf-dir", o.CNIConfDir},
		{"--config-dir", o.ConfigDir}, {"--token-dir", o.TokenDir}} {
		if p.v == "" && !(p.flag == "--src-dir" && o.Src != nil) {
			return fmt.Errorf("%s is empty: give the directory", p.flag)
		}
	}
	switch o.AsWhereabouts {
	case WhereaboutsAuto, WhereaboutsTrue, WhereaboutsFalse:
	default:
		return fmt.Errorf("--install-as-whereabouts=%q: must be auto, true or false", o.AsWhereabouts)
	}
	if len(o.Binaries) == 0 {
		return errors.New("--binaries is empty: name the binaries to install")
	}
	for _, b := range o.Binaries {
		if b == "" || strings.ContainsRune(b, '/') || b == Whereabouts {
			return fmt.Errorf("--binaries: %q is not a binary name (whereabouts is chosen by --install-as-whereabouts)", b)
		}
	}
	if o.APIServer == "" {
		return errors.New("no API server: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set and --api-server is empty; fix: run in a pod (kubelet sets them) or pass --api-server=https://HOST:PORT")
	}
	return nil
}

// plan lists the files to write, in order: binaries, token copies and
// kubeconfigs, rdmanet-ipam.conf, 00-rdmanet.conf. Every input is checked
// and hashed here, before anything is written.
func (o *Options) plan() ([]planned, error) {
	var plan []planned
	src := o.src()
	for _, b := range o.Binaries {
		sum, err := hashFS(src, b)
		if err != nil {
			return nil, fmt.Errorf("binary %s in %s: %w; fix: use the rdmanet image (make image) or point --src-dir at a directory holding %s",
				b, o.srcName(), err, strings.Join(o.Binaries, ", "))
		}
		name := b
		plan = append(plan, planned{entry: Entry{Root: rootBin, Path: b, Kind: kindBinary, SHA256: sum}, mode: 0o755,
			read: func() ([]byte, error) { return fs.ReadFile(src, name) }, src: filepath.Join(o.srcName(), b)})
	}
	if !slices.Contains(o.Binaries, IPAMBinary) && o.AsWhereabouts == WhereaboutsTrue {
		return nil, fmt.Errorf("--install-as-whereabouts=true needs %s among --binaries", IPAMBinary)
	}
	token, err := readProjected(o.TokenDir, ProjectedToken)
	if err != nil {
		return nil, err
	}
	token = bytes.TrimSpace(token) // rdmanet-agent writes it so too: no rewrite at its first round
	ca, err := readProjected(o.TokenDir, ProjectedCA)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(ca), "-----BEGIN CERTIFICATE-----") {
		return nil, fmt.Errorf("%s: not a PEM certificate; fix: project the ConfigMap kube-root-ca.crt (key ca.crt) there: kube-controller-manager publishes the cluster CA in it",
			filepath.Join(o.TokenDir, ProjectedCA))
	}
	tokenFile, caFile := filepath.Join(o.CNIConfDir, HostTokenFile), filepath.Join(o.CNIConfDir, HostCAFile)
	plan = append(plan,
		bytesPlan(Entry{Root: rootConf, Path: HostTokenFile, Kind: kindToken}, 0o600, token, filepath.Join(o.TokenDir, ProjectedToken)),
		bytesPlan(Entry{Root: rootConf, Path: HostCAFile, Kind: kindConfig}, 0o644, ca, filepath.Join(o.TokenDir, ProjectedCA)))
	for _, id := range Identities {
		kc := Kubeconfig(id.Name, o.APIServer, caFile, tokenFile)
		plan = append(plan, bytesPlan(Entry{Root: rootConf, Path: id.Dir + "/" + id.Name + ".kubeconfig", Kind: kindSecret}, 0o600, kc, "server "+o.APIServer))
	}
	type jsonConfig struct{ what, src, dest, missingFix, invalidFix string }
	var configs []jsonConfig
	if o.GUIDPoolConfig != "" {
		configs = append(configs, jsonConfig{"--guid-pool-config", o.GUIDPoolConfig, IPAMDir + "/" + GUIDPoolConf,
			fmt.Sprintf("mount the ConfigMap rdmanet-guid-pool (deploy/components/infiniband, key %s) there, or drop the flag on nodes without a GUID pool", GUIDPoolConf),
			fmt.Sprintf("correct the key %s of the ConfigMap rdmanet-guid-pool (docs/infiniband.md \"GUID pool\")", GUIDPoolConf)})
	}
	for _, c := range []struct{ name, dest string }{{IPAMConf, IPAMDir + "/" + IPAMConf}, {MetaConf, MetaConf}} {
		configs = append(configs, jsonConfig{"config", filepath.Join(o.ConfigDir, c.name), c.dest,
			fmt.Sprintf("mount the ConfigMap rdmanet-node-config (deploy/node-config.yaml, key %s) at --config-dir", c.name),
			fmt.Sprintf("correct the key %s of the ConfigMap rdmanet-node-config", c.name)})
	}
	for _, c := range configs {
		b, err := os.ReadFile(c.src)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w; fix: %s", c.what, c.src, err, c.missingFix)
		}
		if !json.Valid(b) {
			return nil, fmt.Errorf("%s %s is not valid JSON; fix: %s", c.what, c.src, c.invalidFix)
		}
		plan = append(plan, bytesPlan(Entry{Root: rootConf, Path: c.dest, Kind: kindConfig}, 0o644, b, c.src))
	}
	return plan, nil
}

func bytesPlan(e Entry, mode os.FileMode, b []byte, src string) planned {
	e.SHA256 = hashBytes(b)
	return planned{entry: e, mode: mode, read: func() ([]byte, error) { return b, nil }, src: src}
}

// readProjected reads one file of the pod's projected token volume.
func readProjected(dir, name string) ([]byte, error) {
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err == nil && len(strings.TrimSpace(string(b))) == 0 {
		err = errors.New("empty")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w; fix: mount the DaemonSet's projected volume node-token (serviceAccountToken at %s, ConfigMap kube-root-ca.crt at %s) at --token-dir %s (deploy/node-daemonset.yaml)",
			p, err, ProjectedToken, ProjectedCA, dir)
	}
	return b, nil
}

func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func hashReader(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashReader(f)
}

func hashFS(fsys fs.FS, name string) (string, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("not a regular file (%s)", st.Mode())
	}
	return hashReader(f)
}
