package aws

import (
	"slices"
	"sort"
)

// Set helpers the resource files share: sorted keys and differences of ID lists.

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// diffSets returns want minus have and have minus want, sorted.
func diffSets(have, want []string) (add, remove []string) {
	h := map[string]bool{}
	for _, x := range have {
		h[x] = true
	}
	w := map[string]bool{}
	for _, x := range want {
		w[x] = true
		if !h[x] {
			add = append(add, x)
		}
	}
	for x := range h {
		if !w[x] {
			remove = append(remove, x)
		}
	}
	slices.Sort(add)
	slices.Sort(remove)
	return slices.Compact(add), remove
}
