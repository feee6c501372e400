package providertest

import (
	"slices"
	"testing"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/annotations/annotationstest"
)

// CheckOptionRules checks a provider's annotation rules against the key registry: the rules read
// exactly the keys annotations.Keys declares for provider, in order, except those named in
// except (which annotations.Parse reads into the common model), and table has a valid and an
// invalid case for each of them (annotationstest.Table.CheckKeys).
func CheckOptionRules[T any](t testing.TB, table annotationstest.Table[T], rules []annotations.Rule[T], provider string, except ...string) {
	t.Helper()
	var read []string
	for _, r := range rules {
		read = append(read, r.Key)
	}
	var declared []annotationstest.Key
	for _, k := range annotations.Keys {
		if k.Provider == provider && !slices.Contains(except, k.Name) {
			declared = append(declared, annotationstest.Key{Name: k.Name, Aliases: k.Aliases})
		}
	}
	if len(declared) == 0 {
		t.Errorf("annotations.Keys declares no %q key", provider)
	}
	table.CheckKeys(t, read, declared)
}
