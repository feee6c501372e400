// Package registry is the one place that lists Portico's providers (name -> Plugin) and turns
// their configurations into providers for portico-controller and portico-ccm. A new provider is
// its own package exporting a providers.Plugin, plus one line in plugins.
package registry
