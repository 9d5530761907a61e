package meta

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/rdmanet/rdmanet/internal/fsutil"
	"github.com/rdmanet/rdmanet/internal/safename"
)

// podArgs are the Kubernetes keys of CNI_ARGS, parsed and checked.
type podArgs struct {
	Namespace, Name, UID, InfraContainerID string
}

// loadArgs is types.LoadArgs; a variable so that a test can count the
// parses of CNI_ARGS (export_test.go).
var loadArgs = types.LoadArgs

// ParsePodArgs parses CNI_ARGS the way the CNI library does (types.LoadArgs:
// "K=V;K=V", unknown keys refused unless IgnoreUnknown is set) and checks the
// pod's namespace and name, which the static source turns into a file name,
// against the Kubernetes rules. Both may be absent (a call without a pod).
func ParsePodArgs(cniArgs string) (podArgs, error) {
	var ka k8sArgs
	if err := loadArgs(cniArgs, &ka); err != nil {
		return podArgs{}, fmt.Errorf("CNI_ARGS %q: %w", cniArgs, err)
	}
	pa := podArgs{Namespace: string(ka.K8S_POD_NAMESPACE), Name: string(ka.K8S_POD_NAME), UID: string(ka.K8S_POD_UID),
		InfraContainerID: string(ka.K8S_POD_INFRA_CONTAINER_ID)}
	if pa.Namespace != "" || pa.Name != "" {
		if err := safename.Check(safename.PodNamespace, "K8S_POD_NAMESPACE of CNI_ARGS", pa.Namespace); err != nil {
			return podArgs{}, err
		}
		if err := safename.Check(safename.PodName, "K8S_POD_NAME of CNI_ARGS", pa.Name); err != nil {
			return podArgs{}, err
		}
	}
	return pa, nil
}

// PodIdentity is the pod a CNI call is for, as CNI_ARGS name it.
type PodIdentity struct {
	Namespace, Name string
	UID             k8stypes.UID
}

// Call is one CNI call as it entered rdmanet (the daemon's socket, or
// rdmanet-direct): its parameters, checked, and the pod of its CNI_ARGS,
// parsed once. Plugin.Add, Del and Check take it; only ParseCall makes one.
type Call struct {
	Args
	// Pod is the pod of CNI_ARGS (K8S_POD_NAMESPACE, K8S_POD_NAME,
	// K8S_POD_UID); HasPod is false for a call that names none, and for a
	// DEL or CHECK whose CNI_ARGS do not parse (they do not need a pod).
	Pod    PodIdentity
	HasPod bool
	verb   string // the verb ParseCall checked the call for
}

// ParseCall checks a call's runtime values before anything is created or
// read, and parses its CNI_ARGS once:
//   - CNI_ARGS (ParsePodArgs): an ADD whose CNI_ARGS do not parse, or name
//     a pod that breaks the Kubernetes naming rules, is refused; a DEL or
//     CHECK is not (it works from the cache), and has no pod;
//   - CNI_CONTAINERID and CNI_IFNAME, which become file names (checkCall).
//
// On an error the Call still carries the pod when CNI_ARGS named one, so a
// failed ADD can be reported on its pod.
func ParseCall(verb string, a Args) (Call, error) {
	c := Call{Args: a, verb: verb}
	pa, perr := ParsePodArgs(a.Args)
	if perr == nil && pa.Name != "" {
		c.Pod, c.HasPod = PodIdentity{Namespace: pa.Namespace, Name: pa.Name, UID: k8stypes.UID(pa.UID)}, true
	}
	if err := checkCall(verb, a); err != nil {
		return c, err
	}
	if perr != nil && verb == "ADD" {
		return c, callError(verb, perr)
	}
	return c, nil
}

// checked refuses a Call that ParseCall did not make for verb: its values
// would reach file names unchecked.
func (c Call) checked(verb string) error {
	if c.verb != verb {
		return types.NewError(types.ErrInternal, fmt.Sprintf("rdmanet %s of container %q: internal error: the call was checked for %q, not %s (meta.ParseCall)", verb, c.ContainerID, c.verb, verb), "")
	}
	return nil
}

func callError(verb string, err error) error {
	return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("rdmanet %s: %v", verb, err), "")
}

// checkCall refuses a call whose runtime values would leave the plugin's
// directories when they become file names (the cache record and lock of
// CNI_CONTAINERID, libcni's results of CNI_IFNAME): the daemon receives them
// over its socket, without the checks skel makes on an exec'd plugin's
// environment. The pod's namespace and name (the static source's
// network-status file) are ParseCall's. Nothing is created or read before
// these checks.
func checkCall(verb string, a Args) error {
	if err := safename.Check(safename.ContainerID, "CNI_CONTAINERID", a.ContainerID); err != nil {
		return callError(verb, err)
	}
	// DEL may come without an interface name (CNI allows it when the
	// container is gone); ADD and CHECK need one.
	if a.IfName != "" || verb != "DEL" {
		if err := safename.Check(safename.IfName, "CNI_IFNAME", a.IfName); err != nil {
			return callError(verb, err)
		}
	}
	return nil
}

// privateCacheDir makes the plugin's dir and its cache dir (records,
// pending DELs, locks) root-only: created 0700, or tightened to 0700 when a
// hostPath mount or an older release left them open.
func (p *Plugin) privateCacheDir() error {
	if err := fsutil.PrivateDir(p.Conf.CNIDir); err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	if err := fsutil.PrivateDir(p.cacheDir()); err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	return nil
}

// checkStatusName refuses a pod whose namespace or name would leave the
// static source's status dir as a file name.
func checkStatusName(ns, name string) error {
	if err := safename.Check(safename.PodNamespace, "pod namespace", ns); err != nil {
		return fmt.Errorf("set network-status: %w", err)
	}
	if err := safename.Check(safename.PodName, "pod name", name); err != nil {
		return fmt.Errorf("set network-status: %w", err)
	}
	return nil
}
