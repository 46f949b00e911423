{{/* Names, labels and the engine pod template shared by the Deployments. */}}

{{- define "kvlease.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kvlease.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kvlease.labels" -}}
{{ include "kvlease.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "kvlease.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "kvlease.secretName" -}}
{{- .Values.clusterSecret.existingSecret | default (printf "%s-secret" (include "kvlease.fullname" .)) -}}
{{- end -}}

{{- define "kvlease.secretKey" -}}
{{- if .Values.clusterSecret.existingSecret -}}{{ .Values.clusterSecret.existingSecretKey }}{{- else -}}secret{{- end -}}
{{- end -}}

{{/* The port the pod serves on: the sidecar's on llm-d decode pods, else the engine's. */}}
{{- define "kvlease.servingPort" -}}
{{ .Values.ports.http }}
{{- end -}}

{{/* Checks that fail rendering with a message naming the value. */}}
{{- define "kvlease.validate" -}}
{{- if not (has .Values.topology (list "proxy" "llm-d")) -}}
{{- fail (printf "topology %q: want proxy or llm-d" .Values.topology) -}}
{{- end -}}
{{- if not (has .Values.mode (list "disaggregated" "aggregated")) -}}
{{- fail (printf "mode %q: want disaggregated or aggregated" .Values.mode) -}}
{{- end -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (int .Values.drainTimeoutSeconds) -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed drainTimeoutSeconds (%v): Kubernetes would kill engines that are still draining" .Values.terminationGracePeriodSeconds .Values.drainTimeoutSeconds) -}}
{{- end -}}
{{- if and .Values.clusterSecret.value (lt (len .Values.clusterSecret.value) 16) -}}
{{- fail "clusterSecret.value: at least 16 characters (openssl rand -hex 32 makes a good one)" -}}
{{- end -}}
{{- if not (has .Values.kvEvents.encoding (list "map" "array")) -}}
{{- fail (printf "kvEvents.encoding %q: want map or array" .Values.kvEvents.encoding) -}}
{{- end -}}
{{- if and .Values.tls.secretName (eq .Values.topology "llm-d") -}}
{{- fail "tls.secretName with topology llm-d: the routing sidecar's TLS is not configured by this chart; use topology proxy" -}}
{{- end -}}
{{- if not (has (int .Values.tls.clientCertReqs) (list 0 1)) -}}
{{- fail (printf "tls.clientCertReqs %v: want 0 or 1 (2 would fail the kubelet's probes, which present no certificate)" .Values.tls.clientCertReqs) -}}
{{- end -}}
{{- if and (eq .Values.topology "llm-d") (eq (int .Values.llmd.enginePort) (int .Values.ports.http)) -}}
{{- fail "llmd.enginePort must differ from ports.http: the sidecar listens on ports.http" -}}
{{- end -}}
{{- end -}}

{{/*
kvlease.engineDeployment renders one engine Deployment. Its argument is a
dict: root (the chart context), component (prefill, decode, engine),
role (kvlease --role), llmdRole (llm-d.ai/role), spec (the values of the
component), sidecar (llm-d's routing sidecar in front of the engine).
*/}}
{{- define "kvlease.engineDeployment" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $spec := .spec -}}
{{- $enginePort := int $v.ports.http -}}
{{- if .sidecar }}{{ $enginePort = int $v.llmd.enginePort }}{{ end -}}
{{- $servesLeases := ne .role "decode" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "kvlease.fullname" $root }}-{{ .component }}
  labels:
    {{- include "kvlease.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  replicas: {{ $spec.replicas }}
  selector:
    matchLabels:
      {{- include "kvlease.selectorLabels" $root | nindent 6 }}
      app.kubernetes.io/component: {{ .component }}
  template:
    metadata:
      labels:
        {{- include "kvlease.selectorLabels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .component }}
        kvlease.dev/engine: "true"
        llm-d.ai/inference-serving: "true"
        llm-d.ai/role: {{ .llmdRole }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $v.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      # Longer than --drain-timeout: in-flight requests and outstanding
      # leases drain before Kubernetes kills the engine.
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
      {{- with $v.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $v.podSecurityContext | nindent 8 }}
      {{- if .sidecar }}
      initContainers:
        # llm-d's P/D routing sidecar as a native sidecar: it starts before
        # the engine, stops after it, and forwards to the engine on
        # llmd.enginePort, first sending the prefill leg to the engine
        # named by x-prefiller-host-port.
        - name: routing-proxy
          image: {{ $v.llmd.sidecar.image }}
          imagePullPolicy: {{ $v.llmd.sidecar.pullPolicy }}
          restartPolicy: Always
          args:
            - --port={{ $v.ports.http }}
            - --kv-connector={{ $v.llmd.sidecar.connector }}
            - --secure-proxy=false
            {{- range $v.llmd.sidecar.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          ports:
            - name: sidecar
              containerPort: {{ $v.ports.http }}
              protocol: TCP
          resources:
            {{- toYaml $v.llmd.sidecar.resources | nindent 12 }}
          securityContext:
            {{- toYaml $v.securityContext | nindent 12 }}
      {{- end }}
      containers:
        - name: kvlease
          image: {{ include "kvlease.image" $root }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          args:
            - serve
            {{- range $spec.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          env:
            - name: POD_IP
              valueFrom:
                fieldRef:
                  fieldPath: status.podIP
            # Decode engines dial this engine's transfer port at the pod
            # IP (remote_host of its kv_transfer_params).
            - name: KVLEASE_ADVERTISE_HOST
              valueFrom:
                fieldRef:
                  fieldPath: status.podIP
            - name: KVLEASE_HOST
              value: 0.0.0.0
            - name: KVLEASE_ROLE
              value: {{ .role }}
            - name: KVLEASE_PORT
              value: {{ $enginePort | quote }}
            {{- if $servesLeases }}
            - name: KVLEASE_TRANSFER_PORT
              value: {{ $v.ports.transfer | quote }}
            {{- end }}
            - name: KVLEASE_MODEL
              value: {{ $v.model | quote }}
            - name: KVLEASE_PROFILE
              value: {{ $v.profile | quote }}
            - name: KVLEASE_CLUSTER_SECRET
              valueFrom:
                secretKeyRef:
                  name: {{ include "kvlease.secretName" $root }}
                  key: {{ include "kvlease.secretKey" $root }}
            - name: KVLEASE_RELEASE_POLICY
              value: {{ $v.lease.releasePolicy | quote }}
            - name: KVLEASE_KV_LEASE
              value: {{ $v.lease.duration | quote }}
            - name: KVLEASE_DRAIN_TIMEOUT
              value: {{ printf "%ds" (int $v.drainTimeoutSeconds) | quote }}
            {{- if $spec.numBlocks }}
            - name: KVLEASE_NUM_BLOCKS
              value: {{ $spec.numBlocks | quote }}
            {{- end }}
            {{- if $spec.offload }}
            - name: KVLEASE_OFFLOAD
              value: {{ $spec.offload | quote }}
            {{- end }}
            {{- if $spec.leaseSpill }}
            - name: KVLEASE_LEASE_SPILL
              value: {{ $spec.leaseSpill | quote }}
            {{- end }}
            {{- if $v.kvEvents.enabled }}
            - name: KVLEASE_KV_EVENTS_ENDPOINT
              value: {{ printf "tcp://*:%d" (int $v.ports.kvEvents) | quote }}
            - name: KVLEASE_KV_EVENTS_REPLAY_ENDPOINT
              value: {{ printf "tcp://*:%d" (int $v.ports.kvEventsReplay) | quote }}
            - name: KVLEASE_KV_EVENTS_ENCODING
              value: {{ $v.kvEvents.encoding | quote }}
            - name: KVLEASE_KV_EVENTS_TOPIC
              value: {{ $v.kvEvents.topic | default (printf "kv@$(POD_IP):%d@%s" (int $v.ports.http) $v.model) | quote }}
            {{- if and $servesLeases $v.kvEvents.leaseTopic }}
            - name: KVLEASE_KV_EVENTS_LEASE_TOPIC
              value: {{ $v.kvEvents.leaseTopic | quote }}
            {{- end }}
            {{- end }}
            {{- if $v.tls.secretName }}
            - name: KVLEASE_SSL_CERTFILE
              value: /etc/kvlease/tls/tls.crt
            - name: KVLEASE_SSL_KEYFILE
              value: /etc/kvlease/tls/tls.key
            {{- if $v.tls.clientCertReqs }}
            - name: KVLEASE_SSL_CA_CERTS
              value: /etc/kvlease/tls/ca.crt
            - name: KVLEASE_SSL_CERT_REQS
              value: {{ $v.tls.clientCertReqs | quote }}
            {{- end }}
            {{- end }}
            {{- with $spec.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: http
              containerPort: {{ $enginePort }}
              protocol: TCP
            {{- if $servesLeases }}
            - name: transfer
              containerPort: {{ $v.ports.transfer }}
              protocol: TCP
            {{- end }}
            {{- if $v.kvEvents.enabled }}
            - name: kv-events
              containerPort: {{ $v.ports.kvEvents }}
              protocol: TCP
            - name: kv-replay
              containerPort: {{ $v.ports.kvEventsReplay }}
              protocol: TCP
            {{- end }}
          startupProbe:
            httpGet:
              path: /v1/models
              port: http
              scheme: {{ include "kvlease.probeScheme" $root }}
            periodSeconds: {{ $v.probes.startup.periodSeconds }}
            failureThreshold: {{ $v.probes.startup.failureThreshold }}
          readinessProbe:
            httpGet:
              path: /v1/models
              port: http
              scheme: {{ include "kvlease.probeScheme" $root }}
            periodSeconds: {{ $v.probes.readiness.periodSeconds }}
            failureThreshold: {{ $v.probes.readiness.failureThreshold }}
          livenessProbe:
            httpGet:
              path: /health
              port: http
              scheme: {{ include "kvlease.probeScheme" $root }}
            periodSeconds: {{ $v.probes.liveness.periodSeconds }}
            # /health answers 503 while the engine drains: the threshold
            # covers the whole drain.
            failureThreshold: {{ add $v.probes.liveness.failureThreshold (div (int $v.drainTimeoutSeconds) (int $v.probes.liveness.periodSeconds)) 1 }}
          resources:
            {{- toYaml $spec.resources | nindent 12 }}
          securityContext:
            {{- toYaml $v.securityContext | nindent 12 }}
          volumeMounts:
            # Writable space for a disk offload tier (the root file system
            # is read only).
            - name: data
              mountPath: /var/lib/kvlease
            {{- if $v.tls.secretName }}
            - name: tls
              mountPath: /etc/kvlease/tls
              readOnly: true
            {{- end }}
      volumes:
        - name: data
          emptyDir: {}
        {{- if $v.tls.secretName }}
        - name: tls
          secret:
            secretName: {{ $v.tls.secretName }}
        {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/* kvlease.engineService renders the Service of one engine component. */}}
{{- define "kvlease.engineService" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "kvlease.fullname" $root }}-{{ .component }}
  labels:
    {{- include "kvlease.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  selector:
    {{- include "kvlease.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  ports:
    - name: http
      port: {{ $v.ports.http }}
      targetPort: {{ $v.ports.http }}
      protocol: TCP
    {{- if ne .role "decode" }}
    - name: transfer
      port: {{ $v.ports.transfer }}
      targetPort: transfer
      protocol: TCP
    {{- end }}
    {{- if $v.kvEvents.enabled }}
    - name: kv-events
      port: {{ $v.ports.kvEvents }}
      targetPort: kv-events
      protocol: TCP
    - name: kv-replay
      port: {{ $v.ports.kvEventsReplay }}
      targetPort: kv-replay
      protocol: TCP
    {{- end }}
{{- end -}}


{{/* The probes' scheme: HTTPS with tls.secretName. */}}
{{- define "kvlease.probeScheme" -}}
{{- if .Values.tls.secretName }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}
