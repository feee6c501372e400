{{/* The image of binary (a string) for the root context: <registry>/<binary>:<tag>. */}}
{{- define "portico.image" -}}
{{- $root := index . 0 -}}{{- $binary := index . 1 -}}
{{- printf "%s/%s:%s" $root.Values.image.registry $binary (default $root.Chart.AppVersion $root.Values.image.tag) -}}
{{- end -}}

{{/* Labels every object carries; the argument is the component name. */}}
{{- define "portico.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: portico
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}
