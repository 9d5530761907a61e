package meta

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/fsutil"
	"github.com/rdmanet/rdmanet/internal/safename"
)

// podArgs are the Kubernetes keys of CNI_ARGS, parsed and checked.
type podArgs struct {
	Namespace, Name, UID, InfraContainerID string
}

// ParsePodArgs parses CNI_ARGS the way the CNI library does (types.LoadArgs:
// "K=V;K=V", unknown keys refused unless IgnoreUnknown is set) and checks the
// pod's namespace and name, which the static source turns into a file name,
// against the Kubernetes rules. Both may be absent (a call without a pod).
func ParsePodArgs(cniArgs string) (podArgs, error) {
	var ka k8sArgs
	if err := types.LoadArgs(cniArgs, &ka); err != nil {
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

// checkCall refuses a call whose runtime values would leave the plugin's
// directories when they become file names (the cache record and lock of
// CNI_CONTAINERID, libcni's results of CNI_IFNAME, the static source's
// network-status file of the pod): the daemon receives them over its socket,
// without the checks skel makes on an exec'd plugin's environment. Nothing
// is created or read before this check.
func checkCall(verb string, a Args) error {
	fail := func(err error) error {
		return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("rdmanet %s: %v", verb, err), "")
	}
	if err := safename.Check(safename.ContainerID, "CNI_CONTAINERID", a.ContainerID); err != nil {
		return fail(err)
	}
	// DEL may come without an interface name (CNI allows it when the
	// container is gone); ADD and CHECK need one.
	if a.IfName != "" || verb != "DEL" {
		if err := safename.Check(safename.IfName, "CNI_IFNAME", a.IfName); err != nil {
			return fail(err)
		}
	}
	if verb == "ADD" {
		if _, err := ParsePodArgs(a.Args); err != nil {
			return fail(err)
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
