// Package deploy holds what a user installs: the Helm chart deploy/chart/portico (the source)
// and the plain manifests rendered from it (agent.yaml, controller/, ccm/, samples.yaml; the
// CRDs in crds/ are generated from api/ by `make generate` and copied into the chart). Its tests
// lint and render the chart with Helm's Go packages, check the values schema and what each
// template must hold, and keep the rendered manifests in sync: `make chart` rewrites them
// (go test ./deploy -run TestRenderedManifests -update).
package deploy
