package nftables

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	"github.com/google/nftables"
)

// Cleanup deletes the agent's table in both families (TableName) and nothing else; a family
// without the table is skipped.
func Cleanup(ctx context.Context) error {
	if err := deleteTables(nftables.TableFamilyIPv4, nftables.TableFamilyIPv6); err != nil {
		return err
	}
	logr.FromContextOrDiscard(ctx).Info("Removed the agent's nftables tables", "table", TableName)
	return nil
}

// deleteTables deletes the agent's table in the families fams, in one transaction; a family
// without the table is skipped.
func deleteTables(fams ...nftables.TableFamily) error {
	c, err := dial()
	if err != nil {
		return err
	}
	var errs []error
	for _, fam := range fams {
		tables, err := c.ListTablesOfFamily(fam)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing tables: %w", err))
			continue
		}
		if slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == TableName }) {
			c.DelTable(&nftables.Table{Name: TableName, Family: fam})
		}
	}
	if err := c.Flush(); err != nil {
		errs = append(errs, fmt.Errorf("deleting the %s tables: %w", TableName, err))
	}
	return errors.Join(errs...)
}
