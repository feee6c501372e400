package annotations

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The value toolkit every section's rules share (the common keys here, a provider's keys in its
// own package), so that "true", lists and key=value pairs mean the same under every key.

// Problem is one thing wrong with one annotation value: the offending value (the whole
// annotation or one list item) and a message that says what is accepted.
type Problem struct {
	Bad    any
	Detail string
}

// WantBool is the detail of a value that is not "true" or "false".
const WantBool = `must be "true" or "false"`

// ParseBool accepts "true" and "false" only.
func ParseBool(v string) (bool, []Problem) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, []Problem{{v, WantBool}}
}

// ParseInt accepts a decimal integer in [lo, hi]; what names the quantity for the message.
func ParseInt(v string, lo, hi int, what string) (int, []Problem) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, []Problem{{v, fmt.Sprintf("must be an integer %s from %d to %d", what, lo, hi)}}
	}
	return n, nil
}

// ParseSeconds accepts an integer number of seconds in [lo, hi].
func ParseSeconds(v string, lo, hi int) (*time.Duration, []Problem) {
	n, probs := ParseInt(v, lo, hi, "number of seconds")
	if probs != nil {
		return nil, probs
	}
	d := time.Duration(n) * time.Second
	return &d, nil
}

// SplitList splits a comma-separated list, trimming spaces around items. An empty value is an
// empty list; an empty item (",," or a trailing comma) and a repeated item are problems.
// canon maps an item to the form used to detect repeats (nil: the item itself); what names an
// item in the message about a repeat.
func SplitList(v, what string, canon func(string) string) ([]string, []Problem) {
	if v == "" {
		return nil, nil
	}
	var items []string
	var probs []Problem
	seen := map[string]bool{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			probs = append(probs, Problem{v, "empty item in comma-separated list"})
			continue
		}
		c := item
		if canon != nil {
			c = canon(item)
		}
		if seen[c] {
			probs = append(probs, Problem{item, "duplicate " + what})
			continue
		}
		seen[c] = true
		items = append(items, item)
	}
	return items, probs
}

// ParseKeyValues parses "k=v,k2=v2,keyonly" into a map; a key without "=" or with an empty value
// maps to "". check validates one pair and returns its problems.
func ParseKeyValues(v string, check func(k, val string) []Problem) (map[string]string, []Problem) {
	items, probs := SplitList(v, "key", func(item string) string {
		k, _, _ := strings.Cut(item, "=")
		return strings.TrimSpace(k)
	})
	if len(items) == 0 {
		return nil, probs
	}
	out := make(map[string]string, len(items))
	for _, item := range items {
		k, val, _ := strings.Cut(item, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if p := check(k, val); len(p) > 0 {
			probs = append(probs, p...)
			continue
		}
		out[k] = val
	}
	return out, probs
}
