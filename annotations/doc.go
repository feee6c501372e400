// Package annotations owns every Service annotation key Portico reads. Each key is declared once,
// as an exported constant documenting its values, default and aliases, and listed in the Keys
// registry (keys.go: provider-neutral keys; keys_aws.go and keys_baremetal.go: the providers'
// keys); nothing in Portico reads a Service annotation except through this package.
//
// Parse reads the provider-neutral keys (common.go) into a typed Spec. Each provider reads its own
// keys into its own typed options with ParseSection and its rules (providers/aws,
// providers/baremetal: ParseOptions), so that a provider's settings are the provider's type, not
// this package's. Both report every problem at once as a field.ErrorList with paths
// metadata.annotations[<key>], so `kubectl describe service` can say exactly what is wrong and
// what is accepted. Parsing is strict: "yes" is not silently false, unknown keys under
// portico-lb.io/ are reported as typos, and the MetalLB and kube-vip spellings of a key must agree
// with Portico's when both are set. Keys under other prefixes that Portico does not read, and the
// keys of providers other than the Service's, are ignored.
//
// Common rules for values (values.go, shared by every section): surrounding whitespace is
// ignored; lists are comma-separated with optional spaces around items; an empty item or a
// repeated item in a list is an error; an empty list value is the same as an absent key.
//
// The reference in docs/annotations.md is generated from Keys by Markdown and checked by
// TestReferenceUpToDate (go test ./annotations -run TestReferenceUpToDate -update rewrites it).
package annotations
