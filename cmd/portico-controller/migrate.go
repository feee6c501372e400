package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/migrate/metallb"
)

// migrate runs `portico-controller migrate SOURCE [flags]`; the only source is metallb.
func migrate(args []string) {
	if len(args) == 0 || args[0] != "metallb" {
		src := ""
		if len(args) > 0 {
			src = args[0]
		}
		config.ExitOnError(name, fmt.Errorf("migrate: unknown source %q: use `%s migrate metallb [flags]`", src, name))
	}
	cmd := metallb.DefaultCommand()
	fs := pflag.NewFlagSet(name+" migrate metallb", pflag.ContinueOnError)
	cmd.BindFlags(fs)
	config.ExitOnError(name, fs.Parse(args[1:]))
	if fs.NArg() > 0 {
		config.ExitOnError(name, fmt.Errorf("migrate metallb: unexpected argument %q (see --help)", fs.Arg(0)))
	}
	config.ExitOnError(name, cmd.Validate())
	config.ExitOnError(name, cmd.Run(ctrl.SetupSignalHandler(), os.Stdout, os.Stderr))
}
