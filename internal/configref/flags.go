package configref

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/migrate/metallb"
	"github.com/portico-lb/portico/providers/registry"
)

// flagSet is a binary's flag set, split into the flags NewCLI gives every binary and the
// binary's own.
type flagSet struct {
	fs  *pflag.FlagSet
	own []string // sorted
}

func newFlagSet(name string, bind func(fs *pflag.FlagSet)) flagSet {
	cli := config.NewCLI(name)
	fs := cli.Flags()
	before := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { before[f.Name] = true })
	bind(fs)
	var own []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !before[f.Name] {
			own = append(own, f.Name)
		}
	})
	sort.Strings(own)
	return flagSet{fs: fs, own: own}
}

// cliFlags are the flags every Portico binary has (config.NewCLI).
func cliFlags() flagSet {
	cli := config.NewCLI("portico")
	var names []string
	cli.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	return flagSet{fs: cli.Flags(), own: names}
}

func controllerFlags() flagSet {
	return newFlagSet("portico-controller", func(fs *pflag.FlagSet) {
		c := config.DefaultController(registry.NewConfigs())
		c.BindFlags(fs)
	})
}

func orphansFlags() flagSet {
	return newFlagSet("portico-controller orphans", func(fs *pflag.FlagSet) {
		c := config.DefaultOrphans(registry.NewConfigs())
		c.BindFlags(fs)
	})
}

func migrateFlags() flagSet {
	fs := pflag.NewFlagSet("portico-controller migrate metallb", pflag.ContinueOnError)
	metallb.DefaultCommand().BindFlags(fs)
	var own []string
	fs.VisitAll(func(f *pflag.Flag) { own = append(own, f.Name) })
	sort.Strings(own)
	return flagSet{fs: fs, own: own}
}

func agentFlags() flagSet {
	return newFlagSet("portico-agent", func(fs *pflag.FlagSet) {
		c := config.DefaultAgent()
		// The default is this machine's hostname; the flag's usage says so.
		c.NodeName = ""
		c.BindFlags(fs)
	})
}

// flagName renders --name (with its shorthand).
func flagName(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return fmt.Sprintf("`-%s`, `--%s`", f.Shorthand, f.Name)
	}
	return "`--" + f.Name + "`"
}

// flagType is the flag's value type as pflag names it ("" for a boolean switch).
func flagType(f *pflag.Flag) string {
	t := f.Value.Type()
	switch t {
	case "func":
		return "string"
	case "stringArray":
		return "string (repeatable)"
	}
	return t
}

func flagDefault(f *pflag.Flag) string {
	switch f.DefValue {
	case "", "[]":
		return ""
	}
	return "`" + f.DefValue + "`"
}

// deprecatedNames returns "--old (use --new)" for every deprecated flag of names.
func (s flagSet) deprecated() []string {
	var out []string
	for _, n := range s.own {
		if f := s.fs.Lookup(n); f.Deprecated != "" {
			out = append(out, fmt.Sprintf("`--%s` (%s)", n, strings.TrimSuffix(f.Deprecated, ".")))
		}
	}
	return out
}

// current returns the flags of names that are not deprecated.
func (s flagSet) current(except ...string) []*pflag.Flag {
	var out []*pflag.Flag
	for _, n := range s.own {
		f := s.fs.Lookup(n)
		if f.Deprecated != "" || f.Hidden || slices.Contains(except, n) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// controllerKeys finds the key of portico-controller's --config file that each flag sets:
// the flag is set to a value its parser takes, the configuration is completed as main does,
// and the one key whose JSON value changed is the flag's. A flag that sets no key (--config,
// or one whose every trial value is refused) gets none.
func controllerKeys(flags flagSet) (map[string]string, error) {
	base, err := controllerJSON("", "")
	if err != nil {
		return nil, err
	}
	keys := map[string]string{}
	for _, name := range flags.own {
		f := flags.fs.Lookup(name)
		for _, v := range trialValues(f) {
			got, err := controllerJSON(name, v)
			if err != nil {
				continue
			}
			if k := changedKey(base, got, ""); k != "" {
				keys[name] = k
				break
			}
		}
	}
	return keys, nil
}

// trialValues are values tried on a flag to see which key it sets; the first one the flag's
// parser and the configuration's Complete take is used.
func trialValues(f *pflag.Flag) []string {
	if f.Value.Type() == "bool" {
		if f.DefValue == "true" {
			return []string{"false"}
		}
		return []string{"true"}
	}
	return []string{sentinelKey + "=reference", "EC2:Describe.*=1:1", "7s", "7", "198.18.7.0/24", "x"}
}

// sentinelKey is the map key trial values use: a map that gains it changed as a whole.
const sentinelKey = "trialkey"

func controllerJSON(flag, value string) (any, error) {
	c := config.DefaultController(registry.NewConfigs())
	fs := pflag.NewFlagSet("portico-controller", pflag.ContinueOnError)
	c.BindFlags(fs)
	var args []string
	if flag != "" {
		args = []string{"--" + flag + "=" + value}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := c.Complete(fs); err != nil {
		return nil, err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

// changedKey returns the dotted path of the first difference between a and b ("" when equal):
// a key present on one side only is the difference, except the sentinel map key, which marks
// its map.
func changedKey(a, b any, path string) string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if !reflect.DeepEqual(a, b) {
			return path
		}
		return ""
	}
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		av, ain := am[k]
		bv, bin := bm[k]
		if ain != bin {
			if k == sentinelKey {
				return path
			}
			return join(path, k)
		}
		if d := changedKey(av, bv, join(path, k)); d != "" {
			return d
		}
	}
	return ""
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
