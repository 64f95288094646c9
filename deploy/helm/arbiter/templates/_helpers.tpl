{{/* The release's name for its objects, at most 63 characters. */}}
{{- define "arbiter.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "arbiter.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The selector of one component's pods: serve, worker or migrate. */}}
{{- define "arbiter.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The Secret holding database-url, secret-key and session-secret. */}}
{{- define "arbiter.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "arbiter.fullname" .) -}}
{{- end -}}

{{/* The image. */}}
{{- define "arbiter.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The environment serve, worker and migrate share. */}}
{{- define "arbiter.env" -}}
- name: ARBITER_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "arbiter.secretName" . }}
      key: database-url
- name: ARBITER_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "arbiter.secretName" . }}
      key: secret-key
- name: ARBITER_SESSION_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "arbiter.secretName" . }}
      key: session-secret
- name: ARBITER_MIGRATE
  value: "off"
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{/* The pod settings serve, worker and migrate share. */}}
{{- define "arbiter.podSpec" -}}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
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
volumes:
  - name: tmp
    emptyDir: {}
{{- end -}}
