{{/* The image of binary (a string) for the root context, component (controller, agent, ccm)
  choosing image.<component>: <repository>@<digest> when a digest is set (it wins over the tag),
  else <repository>:<tag>; repository defaults to <registry>/<binary>, tag to the appVersion. */}}
{{- define "portico.image" -}}
{{- $root := index . 0 -}}{{- $binary := index . 1 -}}{{- $component := index . 2 -}}
{{- $img := $root.Values.image -}}
{{- $own := index $img $component | default dict -}}
{{- $repo := $own.repository | default (printf "%s/%s" $img.registry $binary) -}}
{{- if $own.digest -}}
{{- printf "%s@%s" $repo $own.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default $root.Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries (Kubernetes' recommended labels); the argument is the component
  name and the root context. Selectors use portico.selectorLabels, which never change. */}}
{{- define "portico.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: portico
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* A pod template's labels: portico.labels and the component's podLabels (which may not
  replace the chart's own: the selectors and monitors depend on them). Argument: name, root,
  values (the component's values). */}}
{{- define "portico.podLabels" -}}
{{- $own := include "portico.labels" . | fromYaml -}}
{{- $all := merge (dict) $own (.values.podLabels | default dict) -}}
{{- toYaml $all -}}
{{- end -}}

{{/* The scheduling knobs every component takes from its values (argument): affinity,
  topologySpreadConstraints, nodeSelector, tolerations, indented for a pod spec. */}}
{{- define "portico.scheduling" -}}
{{- with .topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* portico-agent's /healthz port: agent.healthzPort, or by mode (config.DefaultHealthzBindAddress,
  config.AnnounceOnlyHealthzBindAddress): kube-proxy's with a dataplane, another beside it. */}}
{{- define "portico.agentHealthzPort" -}}
{{- $a := .Values.agent -}}
{{- if $a.healthzPort }}{{ $a.healthzPort }}{{ else if eq $a.mode "none" }}10266{{ else }}10256{{ end -}}
{{- end -}}

{{/* portico-agent's /metrics address: agent.metricsBindAddress, or by mode as the healthz port. */}}
{{- define "portico.agentMetricsBindAddress" -}}
{{- $a := .Values.agent -}}
{{- if $a.metricsBindAddress }}{{ $a.metricsBindAddress | quote }}{{ else if eq $a.mode "none" }}127.0.0.1:10269{{ else }}127.0.0.1:10249{{ end -}}
{{- end -}}

{{/* portico-agent's AgentConfiguration (config package) from the values, for the root context. */}}
{{- define "portico.agentConfig" -}}
{{- $a := .Values.agent -}}
apiVersion: config.portico-lb.io/v1alpha1
kind: AgentConfiguration
{{- if $a.apiServer }}
kubeconfig: /etc/portico/agent/kubeconfig
{{- end }}
mode: {{ $a.mode }}
{{- if $a.ignoreOtherProxy }}
ignoreOtherProxy: true
{{- end }}
healthzBindAddress: 0.0.0.0:{{ include "portico.agentHealthzPort" . }}
metricsBindAddress: {{ include "portico.agentMetricsBindAddress" . }}
{{- with $a.clusterCIDRs }}
clusterCIDRs: {{ toJson . }}
{{- end }}
{{- with $a.announce }}
announce: {{ toJson . }}
{{- end }}
{{- /* The agents announce only the VIPs of the Services a bare-metal provider of this release
  serves: the controller's classes with baremetal, class-less ones when the controller's
  classless provider or portico-ccm's is baremetal. */}}
{{- $c := .Values.controller }}{{ $classes := list }}{{ $classless := false }}
{{- if $c.enabled }}
{{- range $class, $provider := $c.classes }}{{ if eq $provider "baremetal" }}{{ $classes = append $classes $class }}{{ end }}{{ end }}
{{- if eq $c.classlessProvider "baremetal" }}{{ $classless = true }}{{ end }}
{{- end }}
{{- if and .Values.ccm.enabled (eq .Values.ccm.provider "baremetal") }}{{ $classless = true }}{{ end }}
{{- with $classes }}
announceClasses: {{ toJson . }}
{{- end }}
announceClassless: {{ $classless }}
ignoreExcludeLB: {{ .Values.ignoreExcludeLB }}
{{- if has "l2" $a.announce }}
membership:
  enabled: true
  port: {{ $a.membership.port }}
  secret: {{ .Release.Namespace }}/{{ $a.membership.secret.name }}
  createSecret: {{ $a.membership.secret.create }}
  restartHold: {{ $a.membership.restartHold }}
{{- end }}
{{- if has "bgp" $a.announce }}
bgp:
  gracefulRestart: {{ $a.bgpGracefulRestart }}
{{- end }}
daemonSet: {{ .Release.Namespace }}/portico-agent
uninstallCleanup: {{ $a.cleanupOnUninstall }}
externalIPs:
  policy: {{ $a.externalIPs.policy }}
{{- with $a.externalIPs.allowedCIDRs }}
  allowedCIDRs: {{ toJson . }}
{{- end }}
{{- end -}}

{{/* portico-agent's kubeconfig: the API server at agent.apiServer (required with a dataplane: see agent/daemonset.yaml),
  with the pod's service-account token and cluster CA (as kubeadm configures kube-proxy). */}}
{{- define "portico.agentKubeconfig" -}}
apiVersion: v1
kind: Config
clusters:
  - name: default
    cluster:
      server: {{ .Values.agent.apiServer }}
      certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
users:
  - name: default
    user:
      tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
contexts:
  - name: default
    context: {cluster: default, user: default}
current-context: default
{{- end -}}

{{/* A probe's timings (agent.probes.*). */}}
{{- define "portico.probeTimings" -}}
periodSeconds: {{ .periodSeconds }}
failureThreshold: {{ .failureThreshold }}
timeoutSeconds: {{ .timeoutSeconds }}
{{- end -}}
