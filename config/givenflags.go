package config

import (
	"fmt"

	"github.com/spf13/pflag"
)

// givenFlags records the values given to a configuration's flags as they are parsed, in
// order and as written, so that Complete can load --config and then set the command line over
// it again, exactly as it was given: the flags win over the file. A flag's Value.String()
// cannot stand in for what was given (pflag's Func flags return "", a list may print
// differently from how it parses, a flag that appends would append twice). The record lives
// in the flag set, in the Values of the flags BindFlags added (takeGiven finds it through
// --config), not in the configuration, which stays plain data.
type givenFlags struct {
	entries []givenFlag
	// done stops the recording once Complete has taken the entries: the file's values and
	// the replay are not given on the command line.
	done bool
}

type givenFlag struct {
	name, value string
	// into is the flag's own Value, set directly at the replay: through the FlagSet a
	// deprecated name would print its warning twice.
	into pflag.Value
}

// recordGiven runs bind, which registers a configuration's flags (--config among them) on fs,
// and records from then on what is given to each flag bind added (the others, such as the
// logging flags, belong to the binary's CLI and are neither read from --config nor set again).
func recordGiven(fs *pflag.FlagSet, bind func()) {
	had := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { had[f.Name] = true })
	bind()
	g := &givenFlags{}
	fs.VisitAll(func(f *pflag.Flag) {
		if had[f.Name] {
			return
		}
		r := &recordingValue{Value: f.Value, name: f.Name, given: g}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			f.Value = recordingBoolValue{r}
		} else {
			f.Value = r
		}
	})
}

// takeGiven returns the flags given on fs so far, in order, and ends the recording. A flag set
// without the record (flags not bound by the configuration's BindFlags) is an error: its flags
// could not be set again over the file.
func takeGiven(fs *pflag.FlagSet) ([]givenFlag, error) {
	var g *givenFlags
	if f := fs.Lookup("config"); f != nil {
		switch v := f.Value.(type) {
		case *recordingValue:
			g = v.given
		case recordingBoolValue:
			g = v.given
		}
	}
	if g == nil {
		return nil, fmt.Errorf("the flags were not bound by the configuration's BindFlags: cannot apply them over --config")
	}
	g.done = true
	return g.entries, nil
}

// replay sets the given flags again, in the order given.
func replay(given []givenFlag) error {
	for _, g := range given {
		if err := g.into.Set(g.value); err != nil {
			return fmt.Errorf("applying --%s: %w", g.name, err)
		}
	}
	return nil
}

// recordingValue is a flag's Value that records what it is set to (givenFlags).
type recordingValue struct {
	pflag.Value
	name  string
	given *givenFlags
}

func (v *recordingValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	if !v.given.done {
		v.given.entries = append(v.given.entries, givenFlag{name: v.name, value: s, into: v.Value})
	}
	return nil
}

// recordingBoolValue keeps a boolean flag's IsBoolFlag, which pflag's help reads.
type recordingBoolValue struct{ *recordingValue }

func (recordingBoolValue) IsBoolFlag() bool { return true }
