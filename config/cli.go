package config

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json

	"github.com/portico-lb/portico/internal/version"
)

// Exit codes shared by every Portico binary.
const (
	// ExitOK: done, or help or the version was asked for.
	ExitOK = 0
	// ExitStartup: a bad flag, argument or configuration, or a failure to start; the message
	// says which.
	ExitStartup = 1
)

// errVersionPrinted ends a process that printed its version, with ExitOK.
var errVersionPrinted = errors.New("version printed")

// CLI is the command line every Portico binary shares, on the flag library Kubernetes
// components use (spf13/pflag): the binary's own flags, --version, and klog's logging flags
// from k8s.io/component-base/logs (--logging-format text or json, -v, --vmodule, ...).
type CLI struct {
	name    string
	fs      *pflag.FlagSet
	logging *logsapi.LoggingConfiguration
	version bool
}

// NewCLI returns the command line of the binary name; bind the binary's flags on Flags.
func NewCLI(name string) *CLI {
	c := &CLI{name: name, fs: pflag.NewFlagSet(name, pflag.ContinueOnError), logging: logsapi.NewLoggingConfiguration()}
	c.fs.SetOutput(os.Stderr)
	c.fs.BoolVar(&c.version, "version", false, "print the version and exit")
	logsapi.AddFlags(c.logging, c.fs)
	if f := c.fs.Lookup("v"); f != nil {
		f.Usage = "log verbosity: 0 logs changes and errors, 1 adds every sync and reconcile, higher adds detail"
	}
	return c
}

// Flags is the flag set to bind the binary's flags on.
func (c *CLI) Flags() *pflag.FlagSet { return c.fs }

// Parse parses args and refuses positional arguments, which no Portico binary takes. With
// --version it prints the version and returns an error ExitOnError ends the process on with
// ExitOK, as it does for --help. Otherwise it applies the logging flags: klog.Background() is
// then the binary's logger.
func (c *CLI) Parse(args []string) error {
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	if c.version {
		fmt.Fprintf(os.Stdout, "%s %s\n", c.name, version.Get())
		return errVersionPrinted
	}
	if c.fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: %s takes only flags (see --help)", c.fs.Arg(0), c.name)
	}
	if err := logsapi.ValidateAndApply(c.logging, nil); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	return nil
}

// ExitOnError ends the process when err is not nil: with ExitOK for a help or version request
// (already printed) and ExitStartup otherwise, printing "<binary>: <err>" to standard error.
func ExitOnError(binary string, err error) {
	switch {
	case err == nil:
		return
	case errors.Is(err, pflag.ErrHelp), errors.Is(err, errVersionPrinted):
		os.Exit(ExitOK)
	}
	msg := strings.TrimRight(err.Error(), "\n")
	fmt.Fprintf(os.Stderr, "%s: %s\n", binary, msg)
	os.Exit(ExitStartup)
}
