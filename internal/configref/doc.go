// Package configref generates the configuration reference, docs/configuration.md: every flag of
// portico-controller (and its orphans and migrate metallb commands) and portico-agent as their
// flag sets are built by package config (and migrate/metallb), the file keys those flags stand
// for, the keys of portico-ccm's cloud config, and every value of the Helm chart with its type
// from values.schema.json and its default and description from values.yaml (or the schema's
// own default and description, where it gives them).
//
// `make docs` writes the file (go run ./internal/configref/gen); TestReferenceUpToDate fails
// when it is stale, as annotations' test does for docs/annotations.md.
package configref
