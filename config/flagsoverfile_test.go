package config

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/portico-lb/portico/providers/registry"
)

// A binary's command line as its main builds it: NewCLI's flags (--version, the logging flags),
// then the configuration's BindFlags; parse runs the flag set's Parse and the configuration's
// Complete, as main does (CLI.Parse adds only --version handling and applying the logging
// flags, which would change this process's klog).
type binaryUnderTest struct {
	name string
	// bind returns a fresh configuration's command line: the flag set, the names BindFlags
	// added (the others are NewCLI's), and complete, which runs the configuration's Complete
	// and returns it.
	bind func() (fs *pflag.FlagSet, own []string, complete func() (any, error))
	// values holds a valid value, not the default, for every flag of the binary (--config
	// aside); a flag added without one fails the test.
	values map[string]string
	// files are --config files, each with every key set away from the defaults and from
	// values: "one field" sets a single field (every flag but one meets a file that sets
	// other fields), "every field" sets all it can (every flag with a key meets the file
	// setting the same field to another value).
	files map[string]string
}

// cliFlagValues are values for NewCLI's flags: --version and the logging flags of
// k8s.io/component-base/logs (the ones the pinned version registers).
var cliFlagValues = map[string]string{
	"version":                   "true",
	"v":                         "3",
	"vmodule":                   "proxier=4",
	"logging-format":            "json",
	"log-flush-frequency":       "7s",
	"log-json-info-buffer-size": "64Ki",
	"log-json-split-stream":     "true",
	"log-text-info-buffer-size": "64Ki",
	"log-text-split-stream":     "true",
}

func agentUnderTest() binaryUnderTest {
	return binaryUnderTest{
		name: "portico-agent",
		bind: func() (*pflag.FlagSet, []string, func() (any, error)) {
			cli := NewCLI("portico-agent")
			fs := cli.Flags()
			before := flagNames(fs)
			c := DefaultAgent()
			c.BindFlags(fs)
			return fs, without(flagNames(fs), before), func() (any, error) { err := c.Complete(fs); return c, err }
		},
		values: map[string]string{
			"kubeconfig":                            "/etc/portico/flag.kubeconfig",
			"master":                                "https://198.18.0.30:6443",
			"hostname-override":                     "node-flag",
			"node-name":                             "node-flag-old",
			"proxy-mode":                            "iptables",
			"ignore-other-proxy":                    "true",
			"iptables-sync-period":                  "40s",
			"sync-period":                           "41s",
			"iptables-min-sync-period":              "3s",
			"min-sync-period":                       "4s",
			"healthz-bind-address":                  "0.0.0.0:10301",
			"metrics-bind-address":                  "127.0.0.1:10251",
			"cleanup":                               "true",
			"nodeport-addresses":                    "198.18.5.0/24,primary",
			"cluster-cidr":                          "198.18.6.0/24,fd00:c613:6::/64",
			"masquerade-all":                        "true",
			"ignore-exclude-lb":                     "true",
			"iptables-masquerade-bit":               "14",
			"masquerade-bit":                        "15",
			"iptables":                              "/sbin/iptables-legacy",
			"ip6tables":                             "/sbin/ip6tables-legacy",
			"announce":                              "l2,bgp",
			"announce-classes":                      "portico-lb.io/flag-a,portico-lb.io/flag-b",
			"announce-classless":                    "false",
			"bgp-graceful-restart":                  "60s",
			"daemonset":                             "kube-system/portico-flag",
			"bgp-daemonset":                         "kube-system/portico-flag-old",
			"uninstall-cleanup":                     "false",
			"membership":                            "true",
			"membership-bind-address":               "198.18.0.7",
			"membership-port":                       "7950",
			"membership-secret-file":                "/etc/portico/flag-secret",
			"membership-secret":                     "kube-system/portico-flag-key",
			"membership-create-secret":              "true",
			"membership-probe-interval":             "300ms",
			"membership-probe-timeout":              "150ms",
			"membership-suspicion-mult":             "6",
			"membership-suspicion-max-timeout-mult": "3",
			"membership-gossip-interval":            "70ms",
			"membership-rejoin-interval":            "9s",
			"membership-restart-hold":               "25s",
			"external-ip-policy":                    "deny",
			"external-ip-allowed-cidrs":             "198.18.7.0/24,fd00:c613:7::/64",
		},
		files: map[string]string{
			"one field": "apiVersion: config.portico-lb.io/v1alpha1\nkind: AgentConfiguration\nmaster: https://198.18.0.10:6443\n",
			"every field": `apiVersion: config.portico-lb.io/v1alpha1
kind: AgentConfiguration
kubeconfig: /etc/portico/file.kubeconfig
master: https://198.18.0.10:6443
hostnameOverride: node-file
mode: nftables
ignoreOtherProxy: false
healthzBindAddress: 0.0.0.0:10300
metricsBindAddress: "0"
nodePortAddresses: [198.19.0.0/24]
clusterCIDRs: [198.19.1.0/24]
iptables:
  syncPeriod: 45s
  minSyncPeriod: 2s
  masqueradeAll: false
  masqueradeBit: 13
  path: /usr/sbin/iptables-nft
  ip6Path: /usr/sbin/ip6tables-nft
announce: [bgp]
announceClasses: [portico-lb.io/file]
announceClassless: true
ignoreExcludeLB: false
membership:
  enabled: false
  bindAddress: 198.18.0.8
  port: 7999
  secretFile: /etc/portico/file-secret
  secret: kube-system/portico-file-key
  createSecret: false
  probeInterval: 200ms
  probeTimeout: 100ms
  gossipInterval: 60ms
  rejoinInterval: 8s
  suspicionMult: 5
  suspicionMaxTimeoutMult: 4
  restartHold: 20s
bgp: {gracefulRestart: 45s}
daemonSet: kube-system/portico-file
uninstallCleanup: true
externalIPs:
  policy: cidrs
  allowedCIDRs: [198.19.2.0/24]
`,
		},
	}
}

func controllerUnderTest() binaryUnderTest {
	return binaryUnderTest{
		name: "portico-controller",
		bind: func() (*pflag.FlagSet, []string, func() (any, error)) {
			cli := NewCLI("portico-controller")
			fs := cli.Flags()
			before := flagNames(fs)
			c := DefaultController(registry.NewConfigs())
			c.BindFlags(fs)
			return fs, without(flagNames(fs), before), func() (any, error) { err := c.Complete(fs); return c, err }
		},
		values: map[string]string{
			"kubeconfig":                     "/etc/portico/flag.kubeconfig",
			"class":                          "portico-lb.io/flag=reference",
			"classless-provider":             "aws",
			"resync-period":                  "3m",
			"workers":                        "9",
			"ignore-exclude-lb":              "true",
			"leader-elect":                   "false",
			"leader-election-namespace":      "portico-flag",
			"leader-election-id":             "portico-flag",
			"deployment":                     "portico-flag",
			"instance":                       "portico-flag/instance",
			"leader-election-lease-duration": "40s",
			"leader-election-renew-deadline": "30s",
			"leader-election-retry-period":   "5s",
			"metrics-bind-address":           ":9080",
			"health-probe-bind-address":      ":9081",
			"cluster-name":                   "cluster-flag",
			"reference-pool":                 "198.18.130.0/24",
			"baremetal-disable-metrics":      "true",
			"aws-region":                     "eu-west-1",
			"aws-endpoint":                   "https://198.18.0.40:5000",
			"aws-default-type":               "nlb",
			"aws-extra-tags":                 "team=flag,env=test",
			"aws-subnets":                    "subnet-0aa1,subnet-0bb2",
			"aws-verify-period":              "2h",
			"aws-api-throttle":               "EC2:Describe.*=10:40",
			"aws-max-retries":                "5",
			"aws-max-backoff":                "30s",
			"aws-security-groups":            "sg-0cc3",
		},
		files: map[string]string{
			"one field": "clusterName: cluster-file\n",
			"every field": `kubeconfig: /etc/portico/file.kubeconfig
classes: {portico-lb.io/file: baremetal}
classlessProvider: reference
resyncPeriod: 7m
workers: 8
ignoreExcludeLB: false
leaderElect: true
leaderElectionNamespace: portico-file
leaderElectionID: portico-file
deployment: portico-file
instance: portico-file/instance
leaderElectionLease: 50s
leaderElectionRenew: 35s
leaderElectionRetry: 4s
metricsBindAddress: ":7080"
healthProbeBindAddress: ":7081"
clusterName: cluster-file
providers:
  reference: {pool: 198.18.131.0/24}
  baremetal: {disableMetrics: false}
  aws:
    region: us-east-2
    endpoint: https://198.18.0.41:5000
    defaultType: classic
    extraTags: {team: file}
    subnets: [subnet-0dd4]
    securityGroups: [sg-0ee5, sg-0ff6]
    verifyPeriod: 3h
    apiThrottle: ["Elastic Load Balancing:Describe.*=2:4"]
    maxRetries: 4
    maxBackoff: 40s
`,
		},
	}
}

// TestEveryFlagOverConfigFile: every flag of portico-agent's and portico-controller's command
// line, given with --config, ends in the parsed configuration as it does without --config,
// whatever the file sets: the flag wins over the same field in the file, and the file's other
// fields stay. The flags are enumerated from the flag sets the binaries build, so a new flag is
// covered (or fails for want of a test value). portico-ccm is not here: every flag it has
// belongs to the stock cloud-controller-manager command, which parses them once and has no
// --config; its provider settings come only from the --cloud-config file (config.CCM).
//
// On 3e563f2, Complete set the flags given again from Value.String(), which pflag's Func flags
// return as "": --announce and the controller's --aws-extra-tags, --aws-subnets,
// --aws-api-throttle and --aws-security-groups ended empty, file values included (issue 31
// item 3).
func TestEveryFlagOverConfigFile(t *testing.T) {
	for _, b := range []binaryUnderTest{agentUnderTest(), controllerUnderTest()} {
		t.Run(b.name, func(t *testing.T) {
			fs, own, _ := b.bind()
			defaults := parseLeaves(t, b, nil)
			sameField := map[string]bool{}
			fs.VisitAll(func(f *pflag.Flag) {
				if f.Name == "config" {
					return
				}
				value, ok := b.values[f.Name]
				if !ok {
					if value, ok = cliFlagValues[f.Name]; !ok || slices.Contains(own, f.Name) {
						t.Errorf("--%s has no test value: add a valid value other than its default to %s's values", f.Name, b.name)
						return
					}
				}
				arg := "--" + f.Name + "=" + value
				if !slices.Contains(own, f.Name) {
					// NewCLI's flags are not the configuration's: neither the file nor Complete
					// may change what they were given.
					for file, content := range b.files {
						got := parseFlag(t, b, []string{"--config=" + writeFile(t, content), arg}, f.Name)
						want := parseFlag(t, b, []string{arg}, f.Name)
						if got != want || want == f.DefValue {
							t.Errorf("%s: --%s is %q with --config (%s), %q without; default %q", b.name, f.Name, got, file, want, f.DefValue)
						}
					}
					return
				}
				alone := parseLeaves(t, b, []string{arg})
				changed := diff(defaults, alone)
				if len(changed) == 0 {
					t.Errorf("%s %s changes nothing in the configuration: pick a value other than the default", b.name, arg)
					return
				}
				for _, name := range sortedNames(b.files) {
					path := writeFile(t, b.files[name])
					fromFile := parseLeaves(t, b, []string{"--config=" + path})
					for _, args := range [][]string{{"--config=" + path, arg}, {arg, "--config=" + path}} {
						got := parseLeaves(t, b, args)
						for _, field := range sortedNames(got) {
							want, owner := fromFile[field], "the file"
							if slices.Contains(changed, field) {
								want, owner = alone[field], "the flag"
								if !reflect.DeepEqual(fromFile[field], defaults[field]) {
									sameField[f.Name] = true
									if reflect.DeepEqual(fromFile[field], alone[field]) {
										t.Errorf("%s: the %q file sets %s to the value of %s: give it another", b.name, name, field, arg)
									}
								}
							}
							if !reflect.DeepEqual(got[field], want) {
								t.Errorf("%s %v (%s file): %s = %v, want %v from %s", b.name, args, name, field, got[field], want, owner)
							}
						}
					}
				}
			})
			var other []string
			for _, name := range own {
				if !sameField[name] && name != "config" {
					other = append(other, name)
				}
			}
			t.Logf("%s: %d flags (%d the configuration's), each over %d files, before and after --config; %d flags met a file setting the same field to another value (the others: no key, or a file setting the default of a two-valued setting: %s)",
				b.name, len(flagNames(fs)), len(own), len(b.files), len(sameField), strings.Join(other, ", "))
		})
	}
}

// TestRecordedFlagsKeepTheirHelp: recording what the flags are given (BindFlags) changes
// nothing in --help.
func TestRecordedFlagsKeepTheirHelp(t *testing.T) {
	agent, controller := DefaultAgent(), DefaultController(registry.NewConfigs())
	for _, tc := range []struct {
		name        string
		plain, bind func(*pflag.FlagSet)
	}{
		{"portico-agent", agent.bindFlags, agent.BindFlags},
		{"portico-controller", controller.bindFlags, controller.BindFlags},
	} {
		plain, recorded := NewCLI(tc.name).Flags(), NewCLI(tc.name).Flags()
		tc.plain(plain)
		tc.bind(recorded)
		if got, want := recorded.FlagUsages(), plain.FlagUsages(); got != want {
			t.Errorf("%s --help with the flags recorded:\n%s\nwant:\n%s", tc.name, got, want)
		}
	}
}

// parseLeaves parses args on a fresh command line of b and returns the configuration's
// settings by path (see leaves).
func parseLeaves(t *testing.T, b binaryUnderTest, args []string) map[string]any {
	t.Helper()
	fs, _, complete := b.bind()
	fs.SetOutput(io.Discard) // deprecated names print a warning
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%s %v: %v", b.name, args, err)
	}
	c, err := complete()
	if err != nil {
		t.Fatalf("%s %v: %v", b.name, args, err)
	}
	out := map[string]any{}
	leaves(reflect.ValueOf(c), b.name, out)
	return out
}

// parseFlag parses args on a fresh command line of b and returns the flag name's value.
func parseFlag(t *testing.T, b binaryUnderTest, args []string, name string) string {
	t.Helper()
	fs, _, complete := b.bind()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%s %v: %v", b.name, args, err)
	}
	if _, err := complete(); err != nil {
		t.Fatalf("%s %v: %v", b.name, args, err)
	}
	return fs.Lookup(name).Value.String()
}

// leaves records every exported setting reachable from v by its path: it descends into
// structs with exported fields, pointers, interfaces and maps of those (the providers'
// configurations); anything else (a string, a duration, a list, a map of strings, a
// netip.Prefix) is one setting.
func leaves(v reflect.Value, path string, out map[string]any) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			leaves(v.Elem(), path, out)
			return
		}
	case reflect.Struct:
		exported := false
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				exported = true
				name := f.Name
				if f.Anonymous {
					name = ""
				}
				leaves(v.Field(i), path+"."+name, out)
			}
		}
		if exported {
			return
		}
	case reflect.Map:
		if k := v.Type().Elem().Kind(); k == reflect.Pointer || k == reflect.Interface {
			for _, key := range v.MapKeys() {
				leaves(v.MapIndex(key), fmt.Sprintf("%s[%v]", path, key), out)
			}
			return
		}
	}
	out[path] = v.Interface()
}

// diff lists the paths whose settings differ between a and b.
func diff(a, b map[string]any) []string {
	var out []string
	for _, k := range sortedNames(b) {
		if !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	return out
}

func flagNames(fs *pflag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) { out = append(out, f.Name) })
	return out
}

func without(all, drop []string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(s string) bool { return slices.Contains(drop, s) })
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
