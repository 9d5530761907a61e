package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodTemplate is one pod template found in a workload object.
type PodTemplate struct {
	Owner *Object
	// Path is the field path of the template inside the owner
	// ("spec.template", "spec.pytorchReplicaSpecs.Worker.template");
	// "" for a Pod, whose metadata and spec are the object's own.
	Path string
	// Role names the replica/task for CRDs with several templates
	// ("Worker", "Launcher", task name); "" otherwise.
	Role string
	Meta metav1.ObjectMeta
	Spec corev1.PodSpec
	// Replicas is the number of pods the template stands for when the owner
	// says so (parallelism, replicas, ...); 0 when unknown.
	Replicas int
}

// Field prefixes a path relative to the pod template with the template's
// own path: Field("spec.hostNetwork") on a Deployment gives
// "spec.template.spec.hostNetwork".
func (t *PodTemplate) Field(rel string) string {
	if t.Path == "" {
		return rel
	}
	if rel == "" {
		return t.Path
	}
	return t.Path + "." + rel
}

// Namespace of the pods: the template's own namespace if set, else the owner's.
func (t *PodTemplate) Namespace() string {
	if t.Meta.Namespace != "" {
		return t.Meta.Namespace
	}
	return t.Owner.Namespace
}

// templateLoc is a place where a pod template sits in an object.
type templateLoc struct {
	path     string
	role     string
	replicas int
}

// IsWorkload tells whether the object kind carries pod templates this package
// understands.
func IsWorkload(o *Object) bool {
	_, ok := templateLocations(o)
	return ok
}

func templateLocations(o *Object) ([]templateLoc, bool) {
	g := o.Group()
	spec, _ := o.Data["spec"].(map[string]any)
	intAt := func(path string) int {
		v, _ := Get(o.Data, path)
		n, _ := Int(v)
		return n
	}
	switch {
	case g == "" && o.Kind == "Pod":
		return []templateLoc{{path: ""}}, true
	case g == "" && o.Kind == "PodTemplate":
		return []templateLoc{{path: "template"}}, true
	case g == "" && o.Kind == "ReplicationController",
		g == "apps" && (o.Kind == "Deployment" || o.Kind == "StatefulSet" || o.Kind == "ReplicaSet"):
		return []templateLoc{{path: "spec.template", replicas: intAt("spec.replicas")}}, true
	case g == "apps" && o.Kind == "DaemonSet":
		return []templateLoc{{path: "spec.template"}}, true
	case g == "batch" && o.Kind == "Job":
		return []templateLoc{{path: "spec.template", replicas: intAt("spec.parallelism")}}, true
	case g == "batch" && o.Kind == "CronJob":
		return []templateLoc{{path: "spec.jobTemplate.spec.template", replicas: intAt("spec.jobTemplate.spec.parallelism")}}, true
	case g == "kubeflow.org" && strings.HasSuffix(o.Kind, "Job"):
		// PyTorchJob, MPIJob, TFJob, XGBoostJob, PaddleJob, ...:
		// spec.<x>ReplicaSpecs.<Role>.template
		var locs []templateLoc
		keys := slices.Sorted(maps.Keys(spec))
		for _, k := range keys {
			if !strings.HasSuffix(k, "ReplicaSpecs") {
				continue
			}
			roles, _ := spec[k].(map[string]any)
			for _, role := range slices.Sorted(maps.Keys(roles)) {
				base := "spec." + k + "." + role
				if _, ok := Get(o.Data, base+".template"); ok {
					locs = append(locs, templateLoc{path: base + ".template", role: role, replicas: intAt(base + ".replicas")})
				}
			}
		}
		return locs, true
	case g == "batch.volcano.sh" && o.Kind == "Job":
		tasks, _ := spec["tasks"].([]any)
		var locs []templateLoc
		for i, t := range tasks {
			tm, _ := t.(map[string]any)
			name, _ := tm["name"].(string)
			if name == "" {
				name = fmt.Sprintf("task%d", i)
			}
			n, _ := Int(tm["replicas"])
			locs = append(locs, templateLoc{path: fmt.Sprintf("spec.tasks[%d].template", i), role: name, replicas: n})
		}
		return locs, true
	case g == "jobset.x-k8s.io" && o.Kind == "JobSet":
		rjs, _ := spec["replicatedJobs"].([]any)
		var locs []templateLoc
		for i, rj := range rjs {
			m, _ := rj.(map[string]any)
			name, _ := m["name"].(string)
			if name == "" {
				name = fmt.Sprintf("job%d", i)
			}
			par, _ := Int(GetAny(m, "template.spec.parallelism"))
			locs = append(locs, templateLoc{path: fmt.Sprintf("spec.replicatedJobs[%d].template.spec.template", i), role: name, replicas: par})
		}
		return locs, true
	case g == "leaderworkerset.x-k8s.io" && o.Kind == "LeaderWorkerSet":
		var locs []templateLoc
		if _, ok := Get(o.Data, "spec.leaderWorkerTemplate.leaderTemplate"); ok {
			locs = append(locs, templateLoc{path: "spec.leaderWorkerTemplate.leaderTemplate", role: "leader"})
		}
		locs = append(locs, templateLoc{path: "spec.leaderWorkerTemplate.workerTemplate", role: "worker", replicas: intAt("spec.leaderWorkerTemplate.size")})
		return locs, true
	}
	return nil, false
}

// GetAny is Get on an already-decoded sub-tree.
func GetAny(v any, path string) any {
	x, _ := Get(v, path)
	return x
}

// getIndexed walks a path that may contain "[i]" list indexes.
func getIndexed(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	for _, part := range strings.Split(path, ".") {
		key, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 && strings.HasSuffix(part, "]") {
			key = part[:i]
			fmt.Sscanf(part[i+1:len(part)-1], "%d", &idx)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[key]; !ok {
			return nil, false
		}
		if idx >= 0 {
			l, ok := v.([]any)
			if !ok || idx >= len(l) {
				return nil, false
			}
			v = l[idx]
		}
	}
	return v, true
}

// PodTemplates returns the pod templates of a workload object (nil for other
// kinds). A template whose fields have the wrong types (e.g. a number where
// the API wants a string) is a *ParseError naming the object and the field.
func PodTemplates(o *Object) ([]PodTemplate, error) {
	locs, ok := templateLocations(o)
	if !ok {
		return nil, nil
	}
	var out []PodTemplate
	for _, l := range locs {
		raw, ok := getIndexed(o.Data, l.path)
		if !ok || raw == nil {
			if o.Kind == "Pod" {
				raw = o.Data
			} else {
				return nil, &ParseError{File: o.Source.File, Line: o.Source.Line, Err: fmt.Errorf("%s: %s is missing; a %s needs a pod template there", o.Ref(), l.path, o.Kind)}
			}
		}
		var tmpl corev1.PodTemplateSpec
		if err := decodeInto(raw, &tmpl); err != nil {
			where := l.path
			if where == "" {
				where = "(pod)"
			}
			return nil, &ParseError{File: o.Source.File, Line: o.Source.Line, Err: fmt.Errorf("%s: pod template %s does not decode as a Kubernetes pod template: %w", o.Ref(), where, err)}
		}
		if l.path == "" {
			// Pod: metadata is the object's own.
			tmpl.ObjectMeta.Name = o.Name
			tmpl.ObjectMeta.Namespace = o.Namespace
			tmpl.ObjectMeta.Labels = o.Labels
			tmpl.ObjectMeta.Annotations = o.Annotations
		}
		out = append(out, PodTemplate{Owner: o, Path: l.path, Role: l.role, Meta: tmpl.ObjectMeta, Spec: tmpl.Spec, Replicas: l.replicas})
	}
	return out, nil
}

func decodeInto(raw any, v any) error {
	b, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return fmt.Errorf("field %s: got a JSON %s, want %s", ute.Field, ute.Value, ute.Type)
		}
		return err
	}
	return nil
}

// Decode converts the object into a typed API struct (e.g. corev1.Service).
// Type mismatches are a *ParseError naming the object and the field.
func Decode(o *Object, v any) error {
	if err := decodeInto(o.Data, v); err != nil {
		return &ParseError{File: o.Source.File, Line: o.Source.Line, Err: fmt.Errorf("%s does not decode as a %s: %w", o.Ref(), o.Kind, err)}
	}
	return nil
}
