package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/klog/v2/textlogger"
)

// Exit codes shared by every Portico binary.
const (
	// ExitOK: done, or help was asked for.
	ExitOK = 0
	// ExitStartup: a bad flag, argument or configuration, or a failure to start; the message
	// says which.
	ExitStartup = 1
)

// ParseArgs parses args into fs and refuses positional arguments, which no Portico binary
// takes. fs should use flag.ContinueOnError; -h and --help return flag.ErrHelp.
func ParseArgs(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: %s takes only flags (see --help)", fs.Arg(0), fs.Name())
	}
	return nil
}

// AddLogFlags registers the logging flags (-v, -vmodule) on fs with usage text that describes
// this binary's log, and returns their configuration.
func AddLogFlags(fs *flag.FlagSet) *textlogger.Config {
	cfg := textlogger.NewConfig()
	cfg.AddFlags(fs)
	if f := fs.Lookup("v"); f != nil {
		f.Usage = "log verbosity: 0 logs changes and errors, 1 adds every sync and reconcile, higher adds detail"
	}
	if f := fs.Lookup("vmodule"); f != nil {
		f.Usage = "per-file log verbosity, comma list of pattern=N (e.g. sync*=2)"
	}
	return cfg
}

// ExitOnError ends the process when err is not nil: with ExitOK for a help request (the flag
// package has printed the usage) and ExitStartup otherwise, printing "<binary>: <err>" to
// standard error. A startup error from flag parsing is followed by a pointer to --help.
func ExitOnError(binary string, err error) {
	switch {
	case err == nil:
		return
	case errors.Is(err, flag.ErrHelp):
		os.Exit(ExitOK)
	}
	msg := strings.TrimRight(err.Error(), "\n")
	fmt.Fprintf(os.Stderr, "%s: %s\n", binary, msg)
	os.Exit(ExitStartup)
}
