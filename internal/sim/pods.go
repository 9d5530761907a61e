package sim

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// Modes, in the order the demo runs them.
const (
	ModeExclusive = "exclusive"
	ModeShared    = "shared"
	ModeHost      = "host"
)

// InfiniBand variants of the exclusive and shared modes (issue 28), on the
// demo's IB nodes.
const (
	ModeIBExclusive = "ib-exclusive" // ib-sriov VFs with GUIDs from the pool
	ModeIBShared    = "ib-shared"    // an IPoIB child of the shared IB port
)

// AllModes is every mode the demo knows, in the order it runs them.
var AllModes = []string{ModeExclusive, ModeShared, ModeHost, ModeIBExclusive, ModeIBShared}

// DefaultModes are the modes a run without Options.Modes runs: the RoCE
// ones. The IB modes (IBModes, `make demo-ib`) add two nodes and their
// pods, which doubles the demo's time on this machine, so they run when
// asked for.
var DefaultModes = []string{ModeExclusive, ModeShared, ModeHost}

// IBModes are the InfiniBand modes (`kubectl rdma demo --mode ib-exclusive,ib-shared`).
var IBModes = []string{ModeIBExclusive, ModeIBShared}

// IB resources of the IB manifests.
const (
	IBExclusiveResource = "mellanox.com/mlnx_sriov_rdma_ib"
	IBSharedResource    = "rdma/rdma_shared_device_ib"
)

// manifestFiles are the manifests the demo runs on its simulated nodes: the
// seed scenarios' pool configs, NADs and pod templates. They are embedded so
// the demo binary works outside the source tree.
//
//go:embed manifests/*.yaml
var manifestFiles embed.FS

// Manifests are the demo's inputs (manifests/, embedded).
type Manifests struct {
	SriovConfig  []byte // SR-IOV device plugin ConfigMap (exclusive pool)
	SharedConfig []byte // NicClusterPolicy (shared pool)
	NADs         []byte // the NetworkAttachmentDefinitions, multi-document
	// The InfiniBand variants, as ib-sriov-cni and ipoib-cni users write them.
	IBSriovConfig  []byte // SR-IOV device plugin ConfigMap (IB VFs, linkTypes infiniband)
	IBSharedConfig []byte // NicClusterPolicy (the shared IB port)
	IBNADs         []byte // ib-sriov and ipoib NetworkAttachmentDefinitions
	templates      map[string]*corev1.Pod
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// LoadManifests reads the embedded manifests/ files.
func LoadManifests() (*Manifests, error) {
	fsys, err := fs.Sub(manifestFiles, "manifests")
	if err != nil {
		return nil, fmt.Errorf("demo manifests: %w", err)
	}
	return loadManifests(fsys)
}

func loadManifests(fsys fs.FS) (*Manifests, error) {
	read := func(name string) ([]byte, error) {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("demo manifests: %w", err)
		}
		return b, nil
	}
	m := &Manifests{templates: map[string]*corev1.Pod{}}
	var err error
	if m.SriovConfig, err = read("sriovdp-config.yaml"); err != nil {
		return nil, err
	}
	if m.SharedConfig, err = read("nicclusterpolicy.yaml"); err != nil {
		return nil, err
	}
	var nads [][]byte
	for _, f := range []string{"exclusive-nad.yaml", "shared-nad.yaml"} {
		b, err := read(f)
		if err != nil {
			return nil, err
		}
		nads = append(nads, b)
	}
	m.NADs = bytes.Join(nads, []byte("\n---\n"))
	if m.IBSriovConfig, err = read("ib-sriovdp-config.yaml"); err != nil {
		return nil, err
	}
	if m.IBSharedConfig, err = read("ib-nicclusterpolicy.yaml"); err != nil {
		return nil, err
	}
	nads = nil
	for _, f := range []string{"ib-exclusive-nad.yaml", "ib-shared-nad.yaml"} {
		b, err := read(f)
		if err != nil {
			return nil, err
		}
		nads = append(nads, b)
	}
	m.IBNADs = bytes.Join(nads, []byte("\n---\n"))
	for mode, f := range map[string]string{ModeExclusive: "exclusive-job.yaml", ModeShared: "shared-job.yaml", ModeHost: "host-pod.yaml",
		ModeIBExclusive: "ib-exclusive-job.yaml", ModeIBShared: "ib-shared-job.yaml"} {
		b, err := read(f)
		if err != nil {
			return nil, err
		}
		p, err := podTemplate(f, b)
		if err != nil {
			return nil, err
		}
		m.templates[mode] = p
	}
	return m, nil
}

// podTemplate takes the pod template out of the file's Job (or its Pod).
func podTemplate(file string, b []byte) (*corev1.Pod, error) {
	for i, doc := range docSep.Split(string(b), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("demo manifests: %s document %d: %w", file, i+1, err)
		}
		switch tm.Kind {
		case "Job":
			var j batchv1.Job
			if err := yaml.UnmarshalStrict([]byte(doc), &j); err != nil {
				return nil, fmt.Errorf("demo manifests: %s document %d (Job): %w", file, i+1, err)
			}
			p := &corev1.Pod{ObjectMeta: *j.Spec.Template.ObjectMeta.DeepCopy(), Spec: *j.Spec.Template.Spec.DeepCopy()}
			p.Namespace = j.Namespace
			p.GenerateName = j.Name + "-"
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels["job-name"] = j.Name
			return p, nil
		case "Pod":
			var p corev1.Pod
			if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
				return nil, fmt.Errorf("demo manifests: %s document %d (Pod): %w", file, i+1, err)
			}
			// my-training-job-0 -> my-training-job-
			p.GenerateName = strings.TrimRight(p.Name, "0123456789")
			p.Name = ""
			return &p, nil
		}
	}
	return nil, fmt.Errorf("demo manifests: %s holds no Job or Pod", file)
}

// Pod returns pod i of mode, as the Job controller (or an operator, for the
// host-mode pod) would create it, bound to node.
func (m *Manifests) Pod(mode string, i int, node string, uid string) (*corev1.Pod, error) {
	t := m.templates[mode]
	if t == nil {
		return nil, fmt.Errorf("unknown mode %q: want one of %s", mode, strings.Join(AllModes, ", "))
	}
	p := t.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	p.Name = p.GenerateName + strconv.Itoa(i)
	p.GenerateName = ""
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	p.UID = k8stypes.UID(uid)
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	if _, isJob := p.Labels["job-name"]; isJob && mode != ModeHost {
		p.Annotations["batch.kubernetes.io/job-completion-index"] = strconv.Itoa(i)
	}
	p.Spec.NodeName = node
	return p, nil
}

// podYAML is the manifest the static source reads.
func podYAML(p *corev1.Pod) ([]byte, error) {
	b, err := yaml.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return b, nil
}
