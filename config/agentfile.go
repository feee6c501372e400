package config

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The versioned kind of portico-agent's --config file, as kube-proxy's
// KubeProxyConfiguration.
const (
	AgentConfigurationAPIVersion = "config.portico-lb.io/v1alpha1"
	AgentConfigurationKind       = "AgentConfiguration"
)

// AgentConfiguration is portico-agent's --config file: every setting a flag also has, under
// the keys below (kube-proxy's names where kube-proxy has the setting). It is decoded
// strictly: an unknown or repeated key, a wrong apiVersion or kind is a startup error. Flags
// given on the command line override the file's values (as portico-controller's --config);
// --cleanup and --config itself exist only as flags.
//
//	apiVersion: config.portico-lb.io/v1alpha1
//	kind: AgentConfiguration
//	master: https://198.18.0.10:6443
//	clusterCIDRs: [10.244.0.0/16]
//	iptables: {syncPeriod: 30s, minSyncPeriod: 1s}
//	announce: [l2]
//	announceClasses: [portico-lb.io/baremetal]
//	announceClassless: false
//	ignoreExcludeLB: false
//	membership: {enabled: true, secretFile: /etc/portico/membership/secret}
//	externalIPs: {policy: cidrs, allowedCIDRs: [198.18.64.0/24]}
type AgentConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	Kubeconfig         *string            `json:"kubeconfig,omitempty"`
	Master             *string            `json:"master,omitempty"`
	HostnameOverride   *string            `json:"hostnameOverride,omitempty"`
	Mode               *string            `json:"mode,omitempty"`
	IgnoreOtherProxy   *bool              `json:"ignoreOtherProxy,omitempty"`
	HealthzBindAddress *string            `json:"healthzBindAddress,omitempty"`
	MetricsBindAddress *string            `json:"metricsBindAddress,omitempty"`
	NodePortAddresses  []string           `json:"nodePortAddresses,omitempty"`
	ClusterCIDRs       []string           `json:"clusterCIDRs,omitempty"`
	IPTables           *AgentIPTablesFile `json:"iptables,omitempty"`
	Announce           []string           `json:"announce,omitempty"`
	AnnounceClasses    []string           `json:"announceClasses,omitempty"`
	AnnounceClassless  *bool              `json:"announceClassless,omitempty"`
	IgnoreExcludeLB    *bool              `json:"ignoreExcludeLB,omitempty"`
	Membership         *MembershipFile    `json:"membership,omitempty"`
	BGP                *AgentBGPFile      `json:"bgp,omitempty"`
	DaemonSet          *string            `json:"daemonSet,omitempty"`
	UninstallCleanup   *bool              `json:"uninstallCleanup,omitempty"`
	ExternalIPs        *ExternalIPsFile   `json:"externalIPs,omitempty"`
}

// ExternalIPsFile is the externalIPs section of AgentConfiguration (config.ExternalIPPolicy).
type ExternalIPsFile struct {
	Policy       *string  `json:"policy,omitempty"`
	AllowedCIDRs []string `json:"allowedCIDRs,omitempty"`
}

// AgentBGPFile is the bgp section of AgentConfiguration (the bgp announcer's settings).
type AgentBGPFile struct {
	GracefulRestart *metav1.Duration `json:"gracefulRestart,omitempty"`
	// DaemonSet is the top-level daemonSet's first place, still read (the top-level key wins).
	DaemonSet *string `json:"daemonSet,omitempty"`
}

// AgentIPTablesFile is the iptables section of AgentConfiguration.
type AgentIPTablesFile struct {
	SyncPeriod    *metav1.Duration `json:"syncPeriod,omitempty"`
	MinSyncPeriod *metav1.Duration `json:"minSyncPeriod,omitempty"`
	MasqueradeAll *bool            `json:"masqueradeAll,omitempty"`
	MasqueradeBit *int32           `json:"masqueradeBit,omitempty"`
	Path          *string          `json:"path,omitempty"`
	IP6Path       *string          `json:"ip6Path,omitempty"`
}

// MembershipFile is the membership section of AgentConfiguration.
type MembershipFile struct {
	Enabled                 *bool            `json:"enabled,omitempty"`
	BindAddress             *string          `json:"bindAddress,omitempty"`
	Port                    *int32           `json:"port,omitempty"`
	SecretFile              *string          `json:"secretFile,omitempty"`
	Secret                  *string          `json:"secret,omitempty"`
	CreateSecret            *bool            `json:"createSecret,omitempty"`
	ProbeInterval           *metav1.Duration `json:"probeInterval,omitempty"`
	ProbeTimeout            *metav1.Duration `json:"probeTimeout,omitempty"`
	GossipInterval          *metav1.Duration `json:"gossipInterval,omitempty"`
	RejoinInterval          *metav1.Duration `json:"rejoinInterval,omitempty"`
	SuspicionMult           *int32           `json:"suspicionMult,omitempty"`
	SuspicionMaxTimeoutMult *int32           `json:"suspicionMaxTimeoutMult,omitempty"`
	RestartHold             *metav1.Duration `json:"restartHold,omitempty"`
}

// setting is one key of the file that is present: its path and the flag value it stands for.
type setting struct{ key, flag, value string }

// settings lists the keys present in the file, in file order of the struct.
func (f *AgentConfiguration) settings() []setting {
	var out []setting
	str := func(key, flag string, v *string) {
		if v != nil {
			out = append(out, setting{key, flag, *v})
		}
	}
	list := func(key, flag string, v []string) {
		if v != nil {
			out = append(out, setting{key, flag, strings.Join(v, ",")})
		}
	}
	dur := func(key, flag string, v *metav1.Duration) {
		if v != nil {
			out = append(out, setting{key, flag, v.Duration.String()})
		}
	}
	boolean := func(key, flag string, v *bool) {
		if v != nil {
			out = append(out, setting{key, flag, strconv.FormatBool(*v)})
		}
	}
	integer := func(key, flag string, v *int32) {
		if v != nil {
			out = append(out, setting{key, flag, strconv.Itoa(int(*v))})
		}
	}
	str("kubeconfig", "kubeconfig", f.Kubeconfig)
	str("master", "master", f.Master)
	str("hostnameOverride", "hostname-override", f.HostnameOverride)
	str("mode", "proxy-mode", f.Mode)
	boolean("ignoreOtherProxy", "ignore-other-proxy", f.IgnoreOtherProxy)
	str("healthzBindAddress", "healthz-bind-address", f.HealthzBindAddress)
	str("metricsBindAddress", "metrics-bind-address", f.MetricsBindAddress)
	list("nodePortAddresses", "nodeport-addresses", f.NodePortAddresses)
	list("clusterCIDRs", "cluster-cidr", f.ClusterCIDRs)
	if ip := f.IPTables; ip != nil {
		dur("iptables.syncPeriod", "iptables-sync-period", ip.SyncPeriod)
		dur("iptables.minSyncPeriod", "iptables-min-sync-period", ip.MinSyncPeriod)
		boolean("iptables.masqueradeAll", "masquerade-all", ip.MasqueradeAll)
		integer("iptables.masqueradeBit", "iptables-masquerade-bit", ip.MasqueradeBit)
		str("iptables.path", "iptables", ip.Path)
		str("iptables.ip6Path", "ip6tables", ip.IP6Path)
	}
	list("announce", "announce", f.Announce)
	list("announceClasses", "announce-classes", f.AnnounceClasses)
	boolean("announceClassless", "announce-classless", f.AnnounceClassless)
	boolean("ignoreExcludeLB", "ignore-exclude-lb", f.IgnoreExcludeLB)
	if m := f.Membership; m != nil {
		boolean("membership.enabled", "membership", m.Enabled)
		str("membership.bindAddress", "membership-bind-address", m.BindAddress)
		integer("membership.port", "membership-port", m.Port)
		str("membership.secretFile", "membership-secret-file", m.SecretFile)
		str("membership.secret", "membership-secret", m.Secret)
		boolean("membership.createSecret", "membership-create-secret", m.CreateSecret)
		dur("membership.probeInterval", "membership-probe-interval", m.ProbeInterval)
		dur("membership.probeTimeout", "membership-probe-timeout", m.ProbeTimeout)
		dur("membership.gossipInterval", "membership-gossip-interval", m.GossipInterval)
		dur("membership.rejoinInterval", "membership-rejoin-interval", m.RejoinInterval)
		integer("membership.suspicionMult", "membership-suspicion-mult", m.SuspicionMult)
		integer("membership.suspicionMaxTimeoutMult", "membership-suspicion-max-timeout-mult", m.SuspicionMaxTimeoutMult)
		dur("membership.restartHold", "membership-restart-hold", m.RestartHold)
	}
	if b := f.BGP; b != nil {
		dur("bgp.gracefulRestart", "bgp-graceful-restart", b.GracefulRestart)
		str("bgp.daemonSet", "daemonset", b.DaemonSet)
	}
	str("daemonSet", "daemonset", f.DaemonSet)
	boolean("uninstallCleanup", "uninstall-cleanup", f.UninstallCleanup)
	if e := f.ExternalIPs; e != nil {
		str("externalIPs.policy", "external-ip-policy", e.Policy)
		list("externalIPs.allowedCIDRs", "external-ip-allowed-cidrs", e.AllowedCIDRs)
	}
	return out
}

// AgentConfigurationKey is one key of the AgentConfiguration file and the flag it stands for.
type AgentConfigurationKey struct{ Key, Flag string }

// AgentConfigurationKeys lists every key of the AgentConfiguration file with its flag, in the
// file's order (docs/configuration.md is generated from it, package internal/configref).
func AgentConfigurationKeys() []AgentConfigurationKey {
	var f AgentConfiguration
	setEveryField(reflect.ValueOf(&f).Elem())
	var out []AgentConfigurationKey
	for _, s := range f.settings() {
		out = append(out, AgentConfigurationKey{Key: s.key, Flag: s.flag})
	}
	return out
}

// setEveryField gives every pointer and slice field of the struct v a value, recursively, so
// that settings lists every key.
func setEveryField(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		switch f.Kind() {
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
			if f.Elem().Kind() == reflect.Struct {
				setEveryField(f.Elem())
			}
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 0, 0))
		}
	}
}

// LoadAgentConfiguration reads and strictly decodes an AgentConfiguration file.
func LoadAgentConfiguration(path string) (*AgentConfiguration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	var f AgentConfiguration
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if f.APIVersion != AgentConfigurationAPIVersion || f.Kind != AgentConfigurationKind {
		return nil, fmt.Errorf("config file %s: apiVersion %q, kind %q: want apiVersion %s, kind %s", path, f.APIVersion, f.Kind, AgentConfigurationAPIVersion, AgentConfigurationKind)
	}
	return &f, nil
}

// Complete loads --config (if given) and sets the flags given on the command line over it, as
// they were given (BindFlags recorded them). Call it after fs.Parse and before Validate.
func (c *Agent) Complete(fs *pflag.FlagSet) error {
	given, err := takeGiven(fs)
	if err != nil {
		return err
	}
	if c.ConfigFile != "" {
		f, err := LoadAgentConfiguration(c.ConfigFile)
		if err != nil {
			return err
		}
		for _, s := range f.settings() {
			if err := fs.Set(s.flag, s.value); err != nil {
				return fmt.Errorf("config file %s: %s: %w", c.ConfigFile, s.key, err)
			}
		}
		// Flags given on the command line win over the file.
		if err := replay(given); err != nil {
			return err
		}
	}
	c.defaultAddressesByMode(fs)
	return nil
}

// defaultAddressesByMode moves /healthz and /metrics off kube-proxy's ports with
// --proxy-mode=none, where kube-proxy runs beside the agent, unless the command line or the
// file set them.
func (c *Agent) defaultAddressesByMode(fs *pflag.FlagSet) {
	if c.ProxyMode != ProxyModeNone {
		return
	}
	if !fs.Changed("healthz-bind-address") {
		c.HealthzBindAddress = AnnounceOnlyHealthzBindAddress
	}
	if !fs.Changed("metrics-bind-address") {
		c.MetricsBindAddress = AnnounceOnlyMetricsBindAddress
	}
}
