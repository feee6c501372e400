package annotations

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Rule parses one key of Keys (with its aliases) into a section's typed result T: the common
// Spec here, a provider's options in the provider's package. Parse checks one value, with
// surrounding whitespace removed, and stores it in into. It writes only the fields of its own
// key, so that two results can be compared to detect conflicting aliases.
type Rule[T any] struct {
	Key   string
	Parse func(value string, into *T) []Problem
}

// Parse reads the provider-neutral keys (commonRules) and returns the typed spec and every
// problem found, sorted by key. Each problem is a field.Invalid at metadata.annotations[<key>].
// Keys under portico-lb.io/ that are not in Keys are reported as typos; keys under any other
// prefix that Portico does not read are ignored. A provider's own keys are read by the provider's
// ParseOptions (ParseSection with its rules). When the list is not empty the spec holds the valid
// settings only and must not be acted on.
func Parse(annotations map[string]string) (Spec, field.ErrorList) {
	var errs keyedErrors
	spec, winners := parseSection(annotations, commonRules, &errs)
	checkInternalAgrees(&spec, winners, &errs)
	for name, v := range annotations {
		if strings.HasPrefix(name, porticoPrefix) && !isKnown(name) {
			errs.add(name, v, unknownDetail(name))
		}
	}
	return spec, errs.list()
}

// ParseKey reads one provider-neutral key (with its aliases) and nothing else: it returns the
// Spec with only that key's fields set and the key's problems, exactly as Parse reports them. It
// is for readers that apply one rule of a Service without judging the rest, such as
// portico-agent enforcing source ranges. A key Parse does not read is a programming error and
// panics.
func ParseKey(annotations map[string]string, key string) (Spec, field.ErrorList) {
	i := slices.IndexFunc(commonRules, func(r Rule[Spec]) bool { return r.Key == key })
	if i < 0 {
		panic("annotations: ParseKey of a key Parse does not read: " + key)
	}
	var errs keyedErrors
	spec, _ := parseSection(annotations, commonRules[i:i+1], &errs)
	return spec, errs.list()
}

// ParseSection reads the keys of rules (each with its aliases, as Keys declares them) into a T
// with the same strictness as Parse: every problem, sorted by key, at
// metadata.annotations[<key>]. Providers parse their options with it. A rule for a key that is
// not in Keys is a programming error and panics: every key is declared and documented here.
func ParseSection[T any](annotations map[string]string, rules []Rule[T]) (T, field.ErrorList) {
	var errs keyedErrors
	out, _ := parseSection(annotations, rules, &errs)
	return out, errs.list()
}

// parseSection parses rules into a T, adding problems to errs, and reports per canonical key
// which of its names was used and what it parsed to.
func parseSection[T any](annotations map[string]string, rules []Rule[T], errs *keyedErrors) (T, map[string]keyWinner[T]) {
	var out T
	winners := map[string]keyWinner[T]{}
	for _, r := range rules {
		k, ok := lookup(r.Key)
		if !ok {
			panic("annotations: a rule for an undeclared key " + r.Key)
		}
		if w, ok := parseKey(k.names(), r.Parse, annotations, &out, errs); ok {
			winners[k.Name] = w
		}
	}
	return out, winners
}

// keyWinner is the name of a key (or alias) that was used, its value and what it parsed to.
type keyWinner[T any] struct {
	name, value string
	parsed      T
}

// parseKey parses the names of one key (canonical first, then aliases) from annotations into
// out, adding problems to errs. The first valid name wins; the others must parse to the same
// value. It reports the winner.
func parseKey[T any](names []string, parse func(string, *T) []Problem, annotations map[string]string, out *T, errs *keyedErrors) (keyWinner[T], bool) {
	var first *keyWinner[T]
	for _, name := range names {
		raw, ok := annotations[name]
		if !ok {
			continue
		}
		v := strings.TrimSpace(raw)
		var got T
		if probs := parse(v, &got); len(probs) > 0 {
			for _, p := range probs {
				errs.add(name, p.Bad, p.Detail)
			}
			continue
		}
		if first == nil {
			first = &keyWinner[T]{name: name, value: v, parsed: got}
			parse(v, out)
			continue
		}
		if !reflect.DeepEqual(first.parsed, got) {
			errs.add(name, v, fmt.Sprintf("conflicts with %s=%q; set one of them, or give them the same value", first.name, first.value))
		}
	}
	if first == nil {
		return keyWinner[T]{}, false
	}
	return *first, true
}

// lookup returns the Keys entry of a canonical key.
func lookup(name string) (Key, bool) {
	i := slices.IndexFunc(Keys, func(k Key) bool { return k.Name == name })
	if i < 0 {
		return Key{}, false
	}
	return Keys[i], true
}

// keyedErrors collects errors with their annotation key, to sort them by key.
type keyedErrors []keyedError

type keyedError struct {
	key string
	err *field.Error
}

func (e *keyedErrors) add(key string, bad any, detail string) {
	path := field.NewPath("metadata", "annotations").Key(key)
	*e = append(*e, keyedError{key: key, err: field.Invalid(path, bad, detail)})
}

// list returns the errors sorted by key; errors of one key keep the order they were found in.
func (e keyedErrors) list() field.ErrorList {
	slices.SortStableFunc(e, func(a, b keyedError) int { return strings.Compare(a.key, b.key) })
	var out field.ErrorList
	for _, ke := range e {
		out = append(out, ke.err)
	}
	return out
}
