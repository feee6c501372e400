// Package registry is the one place that lists Portico's providers (name -> Plugin) and turns
// their configurations into providers for portico-controller and portico-ccm. A new provider is
// its own package exporting a providers.Plugin, plus one line in plugins.
//
// Only the binaries that run providers link it: their cmd wires it into their configuration
// (config.DefaultController(registry.NewConfigs()), config.LoadCCMFile(path,
// registry.NewConfigs())), so that package config, and portico-agent, link no provider.
package registry
