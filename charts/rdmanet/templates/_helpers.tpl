{{/*
rdmanet.namespace: the release namespace, which must be rdmanet-system
(rdmanet-controller keeps its Lease and certificate Secret there and reads
the agent's ConfigMap there).
*/}}
{{- define "rdmanet.namespace" -}}
{{- if ne .Release.Namespace "rdmanet-system" -}}
{{- fail (printf "rdmanet installs into the namespace rdmanet-system, not %q: helm install --namespace rdmanet-system ..." .Release.Namespace) -}}
{{- end -}}
{{- .Release.Namespace -}}
{{- end -}}

{{/* rdmanet.image: repository:tag, or repository@digest when a digest is set. */}}
{{- define "rdmanet.image" -}}
{{- with .Values.image -}}
{{- if .digest -}}
{{- if not (hasPrefix "sha256:" .digest) -}}
{{- fail (printf "image.digest %q: want sha256:<64 hex digits> (the digest make image printed)" .digest) -}}
{{- end -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository (.tag | default $.Chart.AppVersion | toString) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* rdmanet.imageFields: image and pullPolicy lines of a container. */}}
{{- define "rdmanet.imageFields" -}}
image: {{ include "rdmanet.image" . }}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{/* rdmanet.webhooks: "true" when the webhooks are on (they need the controller). */}}
{{- define "rdmanet.webhooks" -}}
{{- if .Values.webhooks.enabled -}}
{{- if not .Values.controller.enabled -}}
{{- fail "webhooks.enabled needs controller.enabled: rdmanet-controller serves the webhooks (set webhooks.enabled=false, or controller.enabled=true)" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/*
rdmanet.agentConfig: rdmanet-agent's pool config as JSON text: the text of
node.agent.configJSON verbatim when set (--set-file
node.agent.configJSON=config.json), else node.agent.config written as JSON.
*/}}
{{- define "rdmanet.agentConfig" -}}
{{- $a := .Values.node.agent -}}
{{- if $a.configJSON -}}
{{- if not (kindIs "string" $a.configJSON) -}}
{{- fail (printf "node.agent.configJSON: a %s; want the text of a pool config file (--set-file node.agent.configJSON=config.json), or use node.agent.config for an object" (kindOf $a.configJSON)) -}}
{{- end -}}
{{- $a.configJSON -}}
{{- else if kindIs "map" $a.config -}}
{{- toPrettyJson $a.config -}}
{{- else -}}
{{- fail (printf "node.agent.config: a %s; want the pool config as an object (resourceList and/or configList), or its file's text in node.agent.configJSON" (kindOf $a.config)) -}}
{{- end -}}
{{- end -}}

{{/*
rdmanet.policyActions: the validationActions of the node-restriction
policies' bindings: [Deny], or [Warn, Audit] for the upgrade window from a
release before 0.3 (policyAudit.enabled, deploy/components/policy-audit).
*/}}
{{- define "rdmanet.policyActions" -}}
{{- if .Values.policyAudit.enabled -}}
[Warn, Audit]
{{- else -}}
[Deny]
{{- end -}}
{{- end -}}

{{/*
rdmanet.guidPool: "true" when the InfiniBand GUID pool is on
(infiniband.guidPool.ranges set, deploy/components/infiniband); fails on
ranges that are not a list of {start, end}.
*/}}
{{- define "rdmanet.guidPool" -}}
{{- $p := .Values.infiniband.guidPool -}}
{{- if $p.ranges -}}
{{- if not (kindIs "slice" $p.ranges) -}}
{{- fail (printf "infiniband.guidPool.ranges: a %s; want a list of {start, end} GUID ranges, e.g. [{start: \"02:00:00:00:00:00:00:01\", end: \"02:00:00:00:00:00:ff:ff\"}]" (kindOf $p.ranges)) -}}
{{- end -}}
{{- range $i, $r := $p.ranges -}}
{{- if not (and (kindIs "map" $r) $r.start $r.end) -}}
{{- fail (printf "infiniband.guidPool.ranges[%d]: %v; want {start: <GUID>, end: <GUID>}, 8 colon-separated bytes each" $i $r) -}}
{{- end -}}
{{- end -}}
{{- with $p.hook -}}
{{- if not (and (kindIs "slice" .) (hasPrefix "/" (toString (first .)))) -}}
{{- fail (printf "infiniband.guidPool.hook: %v; want a list: the command's absolute path, then fixed arguments (the CNI plugin runs with the runtime's PATH)" .) -}}
{{- end -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/*
rdmanet.guidPoolConfig: guid-pool.json of infiniband.guidPool (the nodes'
format, docs/infiniband.md).
*/}}
{{- define "rdmanet.guidPoolConfig" -}}
{{- $p := .Values.infiniband.guidPool -}}
{{- $ranges := list -}}
{{- range $p.ranges -}}
{{- $ranges = append $ranges (dict "start" (toString .start) "end" (toString .end)) -}}
{{- end -}}
{{- $c := dict "name" $p.name "ranges" $ranges "blockSize" $p.blockSize "store" (dict "type" "kubernetes" "kubeconfig" "/etc/cni/net.d/rdmanet-ipam.d/rdmanet-ipam.kubeconfig") -}}
{{- with $p.hook -}}
{{- $_ := set $c "hook" . -}}
{{- $_ := set $c "hookTimeout" (toString $p.hookTimeout) -}}
{{- end -}}
{{- toPrettyJson $c -}}
{{- end -}}
