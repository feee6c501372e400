package netfilter

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/go-logr/logr"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// Cleanup removes everything the agent installs, in both families: the jump rules in the
// built-in chains (recognised by their comment), then every chain named with rules.Prefix.
// Nothing else is touched. binaries names each family's iptables binary; a family whose binary
// is missing is skipped.
func Cleanup(ctx context.Context, binaries map[rules.Family]string) error {
	log := logr.FromContextOrDiscard(ctx)
	var errs []error
	for fam, bin := range binaries {
		if _, err := exec.LookPath(bin); err != nil {
			log.Info("Skipping family: no iptables binary", "family", fam, "binary", bin)
			continue
		}
		nf, err := NewExec(fam, bin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := cleanupFamily(ctx, nf); err != nil {
			errs = append(errs, fmt.Errorf("cleaning up %s: %w", fam, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.Info("Removed every rule and chain the agent owned")
	return nil
}

func cleanupFamily(ctx context.Context, nf Netfilter) error {
	saved, err := nf.Save(ctx)
	if err != nil {
		return err
	}
	existing := saved.OwnedChains()
	has := map[string]bool{}
	for table, chains := range existing {
		for _, c := range chains {
			has[table+"/"+c] = true
		}
	}
	for _, j := range rules.Jumps() {
		// A jump to a chain that does not exist cannot exist either (and cannot be checked).
		if !has[j.Table+"/"+j.Spec[len(j.Spec)-1]] {
			continue
		}
		if err := nf.DeleteJump(j); err != nil {
			return err
		}
	}
	if input := rules.CleanupInput(existing); input != nil {
		return nf.Restore(ctx, input)
	}
	return nil
}
