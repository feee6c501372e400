package annotations

import (
	"fmt"
	"slices"
	"strings"
)

// Unknown keys under portico-lb.io/: reported as typos, with the closest known key.

// names returns the canonical key followed by its aliases, in precedence order.
func (k Key) names() []string {
	return append([]string{k.Name}, k.Aliases...)
}

func isKnown(name string) bool {
	for _, k := range Keys {
		if slices.Contains(k.names(), name) {
			return true
		}
	}
	return false
}

// unknownDetail explains an unknown portico-lb.io key and suggests the closest known one.
func unknownDetail(name string) string {
	var known []string
	best, bestDist := "", 4 // suggest only keys within three edits
	for _, k := range Keys {
		for _, n := range k.names() {
			if !strings.HasPrefix(n, porticoPrefix) {
				continue
			}
			known = append(known, n)
			d := editDistance(strings.ToLower(name), strings.ToLower(n))
			if d < bestDist {
				best, bestDist = n, d
			}
		}
	}
	msg := "unknown " + porticoPrefix + " annotation"
	if best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return msg + "; known keys: " + strings.Join(known, ", ")
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
