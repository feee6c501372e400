package config

import (
	"errors"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// aggregate turns every validation problem into one error, one sorted line per problem under
// title, or nil when there is none: a bad configuration is reported whole at startup.
func aggregate(title string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	sort.Strings(msgs)
	return errors.New(title + ":\n  " + strings.Join(msgs, "\n  "))
}
