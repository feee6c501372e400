// Package config holds one configuration struct per binary: its defaults, BindFlags, Complete
// (an optional YAML file under the flags) and Validate, which reports every problem at once so a
// bad flag is a clear startup error, never a half-working process.
package config
