{{/* Labels of every object. */}}
{{- define "mm2go.labels" -}}
app.kubernetes.io/part-of: mm2go
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "mm2go.image" -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag }}
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
- name: {{ .fn }}
  image: {{ include "mm2go.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  command: ["/usr/local/bin/{{ .fn }}"]
  args: [{{ .cmd | quote }}]
  {{- if eq .cmd "serve" }}
  ports:
    - name: http1
      containerPort: 8080
  readinessProbe:
    httpGet: {path: /readyz}
    periodSeconds: 10
    timeoutSeconds: 6
  livenessProbe:
    httpGet: {path: /healthz}
    periodSeconds: 20
    timeoutSeconds: 3
  {{- end }}
  envFrom:
    - configMapRef:
        name: mm2go-settings
  env:
    {{- include "mm2go.env" .root | nindent 4 }}
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
spec:
  serviceAccountName: {{ .root.Values.serviceAccount.name }}
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
