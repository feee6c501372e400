// Package healthcheck serves portico-agent's health.
//
// Servers, a consumer of the agent's sync loop, runs one HTTP server per healthCheckNodePort of
// the externalTrafficPolicy: Local Services, where NodePorts answer: any path gets 200 when the
// Service has a ready endpoint on this node and the agent is healthy, else 503, with the JSON
// body {"service":{"namespace","name"},"localEndpoints","serviceProxyHealthy"} and the header
// X-Load-Balancing-Endpoint-Weight. A port that cannot be opened is retried on every sync and
// reported once, as kube-proxy does, by a Warning Event FailedToStartServiceHealthcheck.
//
// ProxyHealth answers /healthz, /readyz and /livez for the agent itself: /healthz is 503 before
// the first sync, when a change has waited more than its timeout (2 x --sync-period) for a
// sync, when one IP family's syncs have been failing that long, or when the Node is unknown or
// being deleted (deletionTimestamp, ToBeDeletedByClusterAutoscaler taint); its body reports
// each family under "families" ({"IPv4": {"healthy", "lastUpdated"}}) and "synced". /readyz
// ignores the node, and /livez also the first sync: it answers 200 from the agent's start.
// A change waits (for the timeout) only from the moment the caches synced: before, the agent
// waits for the API server, which a restart would not hasten. Metrics carry kube-proxy's
// names with the prefix "portico_agent_" instead of "kubeproxy_".
package healthcheck
