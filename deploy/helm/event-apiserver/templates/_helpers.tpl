{{/*
Object names are fixed, the overlays' own (event-apiserver, events-etcd,
the APIServices' and ClusterRoles' names), so that the chart and the
overlays install the same objects: one release per cluster.
*/}}

{{/* Labels of every event-apiserver object. */}}
{{- define "event-apiserver.labels" -}}
app.kubernetes.io/name: event-apiserver
app.kubernetes.io/part-of: event-apiserver
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* Labels of the events etcd's objects. */}}
{{- define "event-apiserver.etcdLabels" -}}
app.kubernetes.io/name: events-etcd
app.kubernetes.io/part-of: event-apiserver
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "event-apiserver.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
Where history is kept: history.store, or the mode's own when it is empty.
aggregated keeps none of its own: its replicas would each keep a SQLite
file on an emptyDir, answer one query differently and lose it on every
rollout, so history there is a database they share (postgres) or off.
*/}}
{{- define "event-apiserver.historyStore" -}}
{{- if .Values.history.store -}}
{{ .Values.history.store }}
{{- else if eq .Values.mode "aggregated" -}}
none
{{- else -}}
sqlite
{{- end }}
{{- end }}

{{/* The Deployment's replicas: the value, or the mode's own. */}}
{{- define "event-apiserver.replicas" -}}
{{- if ne .Values.replicaCount nil -}}
{{ .Values.replicaCount }}
{{- else if and (eq .Values.mode "history-only") (eq (include "event-apiserver.historyStore" .) "postgres") -}}
2
{{- else if eq .Values.mode "aggregated" -}}
2
{{- else -}}
1
{{- end }}
{{- end }}

{{/*
--history-max-bytes: history.maxBytes, or else for SQLite a cap below its
volume, as the overlays set it. The volume holds the file, its WAL (up to
40 MiB) and a minute of capture between retention passes
(TestHistorySQLiteFitsItsVolume holds every mode to it); a full claim
stops capture. PostgreSQL: 0, the database's own storage and the retention
size it. Not rendered while history is off.
*/}}
{{- define "event-apiserver.historyMaxBytes" -}}
{{- $v := .Values -}}
{{- if ne $v.history.maxBytes nil -}}
{{ $v.history.maxBytes | int64 }}
{{- else if eq (include "event-apiserver.historyStore" .) "postgres" -}}
0
{{- else if eq $v.mode "history-only" -}}
{{- /* 80% of the claim, leaving at least 128 MiB for the WAL and a minute of capture. */ -}}
{{- $size := include "event-apiserver.quantityBytes" $v.history.sqlite.persistence.size | int64 -}}
{{- $bytes := sub $size (max (div $size 5) 134217728) -}}
{{- if le $bytes 0 -}}
{{- fail (printf "history.sqlite.persistence.size=%s leaves history no room beside its WAL: make it larger than 128Mi, or set history.maxBytes" $v.history.sqlite.persistence.size) -}}
{{- end -}}
{{ $bytes }}
{{- else -}}
{{- /* The claim less 4 GiB for the embedded etcd (its 2 GiB quota, its WAL and snapshots) and 128 MiB for history's WAL and a minute of capture. */ -}}
{{- $bytes := sub (include "event-apiserver.quantityBytes" $v.standalone.persistence.size | int64) 4429185024 -}}
{{- if le $bytes 0 -}}
{{- fail (printf "standalone.persistence.size=%s leaves history no room beside the embedded etcd's 4 GiB and its WAL: make it larger, or set history.maxBytes" $v.standalone.persistence.size) -}}
{{- end -}}
{{ $bytes }}
{{- end }}
{{- end }}

{{/* The bytes of a Kubernetes quantity such as 10Gi or 1.5T. */}}
{{- define "event-apiserver.quantityBytes" -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" . -}}
{{- $units := dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "Pi" 1125899906842624 "Ei" 1152921504606846976 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "P" 1000000000000000 "E" 1000000000000000000 -}}
{{- mulf $number (get $units (trimPrefix $number .)) | floor | int64 -}}
{{- end }}

{{/* Whether the Deployment must run its one replica alone: one SQLite file on a volume, or one embedded etcd. */}}
{{- define "event-apiserver.singleWriter" -}}
{{- if or (eq .Values.mode "standalone") (and (eq .Values.mode "history-only") (eq (include "event-apiserver.historyStore" .) "sqlite")) -}}
true
{{- end }}
{{- end }}

{{/* The APIServices this mode registers. */}}
{{- define "event-apiserver.apiServiceNames" -}}
{{- if eq .Values.mode "aggregated" -}}
v1.events.k8s.io,v1alpha1.history.eventapiserver.io
{{- else if eq .Values.mode "history-only" -}}
v1alpha1.history.eventapiserver.io
{{- end }}
{{- end }}

{{/* The serving certificate's Secret and the key of its CA. */}}
{{- define "event-apiserver.servingSecret" -}}
{{- if .Values.certManager.enabled -}}
event-apiserver-tls
{{- else -}}
event-apiserver-serving
{{- end }}
{{- end }}

{{- define "event-apiserver.servingCAKey" -}}
{{- if .Values.certManager.enabled -}}
ca.crt
{{- else -}}
ca-bundle.crt
{{- end }}
{{- end }}

{{/*
The PostgreSQL history store's DSN, from the Secret history.postgres names:
the one place that wires it, called with (dict "part" <part> "Values"
.Values) for each part of the pod spec: "args", "volumeMounts", "volumes". As components/history-postgres does, the Secret is mounted as a
file read once at start (--history-dsn-file), so the password is in neither
the pod spec nor the process's arguments; a changed Secret takes effect at
the next rollout. --history=true is the component's too: it turns history
back on where overlays/aggregated turned it off.
*/}}
{{- define "event-apiserver.historyPostgres" -}}
{{- $pg := .Values.history.postgres -}}
{{- if eq .part "args" }}
- --history=true
- --history-store=postgres
- --history-dsn-file=/var/run/secrets/event-apiserver/history/dsn
{{- else if eq .part "volumeMounts" }}
- name: history-dsn
  mountPath: /var/run/secrets/event-apiserver/history
  readOnly: true
{{- else if eq .part "volumes" }}
- name: history-dsn
  secret:
    secretName: {{ $pg.existingSecret }}
    items:
    - key: {{ $pg.existingSecretKey }}
      path: dsn
    # Read by the container's user through the pod's fsGroup.
    defaultMode: 0440
{{- end }}
{{- end }}

{{/*
The combinations of values the chart refuses, with why. values.schema.json
refuses the same ones (its allOf), which is what helm lint reports: lint
renders templates in a mode where fail only logs. These messages are what
helm template and install print when the schema is skipped
(--skip-schema-validation). Rendered (empty) by templates/deployment.yaml,
which every mode has.
*/}}
{{- define "event-apiserver.validate" -}}
{{- $v := .Values -}}
{{- $replicas := include "event-apiserver.replicas" . | int -}}
{{- if and (include "event-apiserver.singleWriter" .) (gt $replicas 1) -}}
{{- if eq $v.mode "standalone" -}}
{{- fail (printf "replicaCount=%d: standalone runs one replica (its embedded etcd is one process; a second replica would be a second, separate store)" $replicas) -}}
{{- else -}}
{{- fail (printf "replicaCount=%d: history.store=sqlite keeps history in one file on one volume, for one replica; use history.store=postgres for more" $replicas) -}}
{{- end -}}
{{- end -}}
{{- if and (eq $v.mode "aggregated") (eq $v.history.store "sqlite") -}}
{{- fail "history.store=sqlite with mode=aggregated: each replica would keep its own SQLite on its emptyDir, answer one history query differently from the others and lose it on every rollout; use history.store=postgres (one database every replica shares) or none (history off, the mode's default)" -}}
{{- end -}}
{{- if and (eq (include "event-apiserver.historyStore" .) "none") (or $v.history.retention (ne $v.history.maxBytes nil)) -}}
{{- fail (printf "history.retention and history.maxBytes need history, which is off (history.store=none%s): set history.store=postgres" (ternary ", mode=aggregated's default" "" (not $v.history.store))) -}}
{{- end -}}
{{- if and (eq $v.mode "history-only") (eq $v.history.store "none") -}}
{{- fail "history.store=none with mode=history-only: that mode serves history and nothing else; use sqlite or postgres" -}}
{{- end -}}
{{- if and $v.eventsEtcd.enabled (ne $v.mode "aggregated") -}}
{{- fail (printf "eventsEtcd.enabled=true needs mode=aggregated (mode=%s uses no events etcd)" $v.mode) -}}
{{- end -}}
{{- if and $v.eventsEtcd.enabled $v.etcd.staticPods -}}
{{- fail "eventsEtcd.enabled=true and etcd.staticPods=true are two events etcds: choose the StatefulSet (eventsEtcd) or the static pods (etcd.staticPods)" -}}
{{- end -}}
{{- if and $v.certManager.enabled (eq $v.mode "standalone") -}}
{{- fail "certManager.enabled=true needs mode=history-only or aggregated: standalone has no APIService and writes a kubeconfig trusting its own self-signed CA" -}}
{{- end -}}
{{- if and $v.monitoring.enabled (eq $v.mode "standalone") -}}
{{- fail "monitoring.enabled=true needs mode=history-only or aggregated: standalone authorizes /metrics with its own admin token only" -}}
{{- end -}}
{{- if and $v.etcd.staticPods (ne $v.mode "aggregated") -}}
{{- fail (printf "etcd.staticPods=true needs mode=aggregated (mode=%s uses no events etcd)" $v.mode) -}}
{{- end -}}
{{- if and $v.fleet.enabled (ne $v.mode "history-only") -}}
{{- fail (printf "fleet.enabled=true needs mode=history-only (mode=%s): a fleet's hub captures its members through their APIs, as history-only captures its own cluster" $v.mode) -}}
{{- end -}}
{{- if and $v.fleet.enabled (ne (include "event-apiserver.historyStore" .) "postgres") -}}
{{- fail "fleet.enabled=true needs history.store=postgres: SQLite keeps one version per namespace, Event name and resourceVersion, which two member clusters' Events may share, so the server refuses a fleet on SQLite" -}}
{{- end -}}
{{- if and $v.networkPolicy.enabled (not $v.networkPolicy.kubeAPIServerCIDRs) -}}
{{- fail "networkPolicy.enabled=true needs networkPolicy.kubeAPIServerCIDRs: the addresses kube-apiserver connects from (it usually runs on the host network, which no pod selector matches)" -}}
{{- end -}}
{{- end }}

{{/*
A fleet's hub's memory limit in MiB: history-only's 512 plus, for each member
it may capture (fleet.maxMembers, the server's 100 when empty), that member's
full queue (fleet.memberQueueBytes, 8 MiB when empty) and the 4 MiB the hub
keeps per member besides (docs/fleet.md, sizing). The queues fill when the
store falls behind, all of them at once when it is down: the limit holds that.
*/}}
{{- define "event-apiserver.fleetHubMemoryMi" -}}
{{- $members := .Values.fleet.maxMembers | default 100 | int64 -}}
{{- $queueMi := div (add (.Values.fleet.memberQueueBytes | default 8388608 | int64) 1048575) 1048576 -}}
{{- add 512 (mul $members (add $queueMi 4)) -}}
{{- end -}}
