{{/*
The prefix of every object name: the release name, followed by the chart name unless the
release name already holds it ("mm2go" gives mm2go-mirror, "eu" gives eu-mm2go-mirror), so
two releases in one namespace share no object. fullnameOverride replaces it.
*/}}
{{- define "mm2go.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end -}}

{{/* The name of one object: the prefix and a suffix. Arguments: root, suffix. */}}
{{- define "mm2go.name" -}}
{{- printf "%s-%s" (include "mm2go.fullname" .root) .suffix -}}
{{- end -}}

{{- define "mm2go.settingsName" -}}{{ include "mm2go.name" (dict "root" . "suffix" "settings") }}{{- end -}}
{{- define "mm2go.serviceAccountName" -}}{{ .Values.serviceAccount.name | default (include "mm2go.fullname" .) }}{{- end -}}
{{- define "mm2go.lagGroup" -}}{{ .Values.keda.lagGroup | default (include "mm2go.name" (dict "root" . "suffix" "lag")) }}{{- end -}}
{{- define "mm2go.burstGroup" -}}{{ .Values.keda.burstGroup | default (include "mm2go.name" (dict "root" . "suffix" "burst")) }}{{- end -}}
{{- define "mm2go.knativeGroup" -}}{{ .Values.knative.consumerGroup | default (include "mm2go.name" (dict "root" . "suffix" "mirror-knative")) }}{{- end -}}
{{/* The schedule of one function (arguments: root, fn): schedules.<fn>, or when empty every 5
minutes as PingSources (shape knative: a tick every minute would keep the pod up for good) and
every minute as CronJobs. */}}
{{- define "mm2go.schedule" -}}
{{- index .root.Values.schedules .fn | default (ternary "*/5 * * * *" "* * * * *" (eq .root.Values.shape "knative")) -}}
{{- end -}}
{{/* The OIDC audience of one function (arguments: root, fn): knative.functions.<fn>.audience, or
its Service's name. Its sources request it (sink.audience) and it accepts no other. */}}
{{- define "mm2go.audience" -}}
{{- (index .root.Values.knative.functions .fn).audience | default (include "mm2go.name" (dict "root" .root "suffix" .fn)) -}}
{{- end -}}

{{/* The token subjects one function accepts (arguments: root, fn), comma separated:
knative.functions.<fn>.allowedSubjects, or the OIDC service accounts Eventing creates for the
sources that call it (<source>-oidc-sources.knative.dev-<kind> in the release namespace). */}}
{{- define "mm2go.oidcSubjects" -}}
{{- $f := index .root.Values.knative.functions .fn -}}
{{- if $f.allowedSubjects -}}
{{- join "," $f.allowedSubjects -}}
{{- else -}}
{{- $srcs := list (list (ternary "mirror-burst" .fn (eq .fn "mirror")) "pingsource") -}}
{{- if eq .fn "mirror" }}{{ $srcs = prepend $srcs (list "mirror" "kafkasource") }}{{ end -}}
{{- $out := list -}}
{{- range $s := $srcs -}}
{{- $parent := include "mm2go.name" (dict "root" $.root "suffix" (index $s 0)) -}}
{{- $sa := lower (printf "%s-oidc-sources.knative.dev-%s" $parent (index $s 1)) -}}
{{- if gt (len $sa) 63 -}}
{{- fail (printf "knative.functions.%s.allowedSubjects: the OIDC service account of %s %s is longer than 63 characters, so Eventing shortens it with a hash; list the subjects (kubectl get %s %s -o jsonpath='{.status.auth.serviceAccountName}')" $.fn (index $s 1) $parent (index $s 1) $parent) -}}
{{- end -}}
{{- $out = append $out (printf "system:serviceaccount:%s:%s" $.root.Release.Namespace $sa) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "mm2go.labels" -}}
app.kubernetes.io/part-of: mm2go
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* repository:tag, tag defaulting to the chart's appVersion; a digest pins it (repository:tag@digest). */}}
{{- define "mm2go.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- with .Values.image.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{ $ref }}
{{- end -}}

{{/* Pod template annotations: the settings' checksum (a change of the ConfigMap rolls new pods
and a new Knative Revision) and podAnnotations. Arguments: root, extra (dict, may be empty). */}}
{{- define "mm2go.podAnnotations" -}}
checksum/settings: {{ include (print .root.Template.BasePath "/configmap.yaml") .root | sha256sum }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- with .root.Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Scheduling and pull secrets of every pod. */}}
{{- define "mm2go.podScheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Whether any cluster signs in with Azure workload identity. */}}
{{- define "mm2go.workloadIdentity" -}}
{{- if or (eq .Values.source.auth "azureWorkloadIdentity") (eq .Values.target.auth "azureWorkloadIdentity") }}true{{ end -}}
{{- end -}}

{{/* Pod labels; workload identity needs the webhook's label. */}}
{{- define "mm2go.podLabels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if include "mm2go.workloadIdentity" .root }}
azure.workload.identity/use: "true"
{{- end }}
{{- end -}}

{{/* The credentials env of one container: per cluster, SASL keys from the Secret or Azure AD. */}}
{{- define "mm2go.env" -}}
{{- $v := .Values -}}
{{- range $role := list "source" "target" }}
{{- $c := index $v $role }}
{{- $R := upper $role }}
{{- if eq $c.auth "azureWorkloadIdentity" }}
- name: MM2_{{ $R }}_AZURE_AUTH
  value: workload-identity
{{- with $v.azure.clientId }}
- name: MM2_{{ $R }}_AZURE_CLIENT_ID
  value: {{ . | quote }}
{{- end }}
{{- else if dig "oauthbearer" "tokenEndpointUrl" "" $c }}
# OAUTHBEARER at <role>.oauthbearer.tokenEndpointUrl (ConfigMap); client ID and secret in the
# JAAS line of the Secret (docs/oauthbearer.md).
- name: MM2_{{ $R }}_SASL_MECHANISM
  value: OAUTHBEARER
- name: MM2_{{ $R }}_SASL_JAAS_CONFIG
  valueFrom: {secretKeyRef: {name: {{ $v.auth.secretName }}, key: {{ $role }}-sasl-jaas-config, optional: true}}
{{- else }}
- name: MM2_{{ $R }}_SASL_MECHANISM
  valueFrom: {secretKeyRef: {name: {{ $v.auth.secretName }}, key: {{ $role }}-sasl-mechanism, optional: true}}
- name: MM2_{{ $R }}_SASL_USERNAME
  valueFrom: {secretKeyRef: {name: {{ $v.auth.secretName }}, key: {{ $role }}-sasl-username, optional: true}}
- name: MM2_{{ $R }}_SASL_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ $v.auth.secretName }}, key: {{ $role }}-sasl-password, optional: true}}
- name: MM2_{{ $R }}_EVENTHUBS_CONNECTION_STRING
  valueFrom: {secretKeyRef: {name: {{ $v.auth.secretName }}, key: {{ $role }}-eventhubs-connection-string, optional: true}}
{{- end }}
{{- end }}
{{- end -}}

{{/* One function container. Arguments: root, fn, cmd ("run" or "serve"). */}}
{{- define "mm2go.container" -}}
- name: {{ get . "name" | default .fn }}
  image: {{ include "mm2go.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  command: ["/usr/local/bin/{{ .fn }}"]
  args: [{{ .cmd | quote }}]
  {{- if eq .cmd "serve" }}
  ports:
    - name: http1
      containerPort: 8080
  # Ready once the process serves (/healthz), as in knative/services.yaml: /readyz needs both
  # clusters, and an unready pod makes Knative's activator hold every event for up to
  # timeoutSeconds, while a ready one answers 503 at once, which the sources retry or give up
  # on in seconds. No periodSeconds (nor timeoutSeconds, which Knative then refuses): the
  # queue-proxy probes every 25 ms until the pod is ready.
  readinessProbe:
    httpGet: {path: /healthz}
  livenessProbe:
    httpGet: {path: /healthz}
    periodSeconds: 20
    timeoutSeconds: 3
  {{- end }}
  envFrom:
    - configMapRef:
        name: {{ include "mm2go.settingsName" .root }}
  env:
    {{- include "mm2go.env" .root | nindent 4 }}
    {{- if and (eq .cmd "serve") .root.Values.knative.oidc.issuer }}
    # Sender authentication: this function's own audience and sources only.
    - name: MM2_SERVE_OIDC_ISSUER
      value: {{ .root.Values.knative.oidc.issuer | quote }}
    - name: MM2_SERVE_OIDC_AUDIENCE
      value: {{ include "mm2go.audience" . | quote }}
    - name: MM2_SERVE_OIDC_ALLOWED_SUBJECTS
      value: {{ include "mm2go.oidcSubjects" . | quote }}
    {{- end }}
  resources:
    {{- toYaml (index .root.Values.resources .fn) | nindent 4 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: ["ALL"]
    seccompProfile:
      type: RuntimeDefault
{{- end -}}

{{/* The pod spec of a run Job. Arguments: root, fn. */}}
{{- define "mm2go.jobPod" -}}
metadata:
  labels:
    {{- include "mm2go.podLabels" (dict "root" .root "name" (printf "mm2go-%s" .fn)) | nindent 4 }}
  annotations:
    {{- include "mm2go.podAnnotations" (dict "root" .root "extra" dict) | nindent 4 }}
spec:
  serviceAccountName: {{ include "mm2go.serviceAccountName" .root }}
  {{- include "mm2go.podScheduling" .root | nindent 2 }}
  {{- if not (include "mm2go.workloadIdentity" .root) }}
  automountServiceAccountToken: false
  {{- end }}
  restartPolicy: Never
  terminationGracePeriodSeconds: 30
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  containers:
    {{- include "mm2go.container" (dict "root" .root "fn" .fn "cmd" "run") | nindent 4 }}
{{- end -}}
