package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// start runs one control-plane binary under the process supervisor, logging to a file in the
// cluster directory; Stop stops it.
func (c *Cluster) start(name, bin string, args ...string) (*process.Process, error) {
	p, err := process.Start(bin, process.Options{Name: name, Args: args, LogPath: filepath.Join(c.dir, name+".log"), Logf: c.logf})
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// waitFor polls check until it succeeds, the process exits, ctx ends or the timeout passes;
// the error carries the process's log tail.
func waitFor(ctx context.Context, p *process.Process, timeout time.Duration, check func() error) error {
	err := wait.Poll(ctx, 100*time.Millisecond, timeout, p.Name()+" to be ready", func(context.Context) error {
		if p.Exited() {
			return wait.Stop(fmt.Errorf("%s exited: %v", p.Name(), p.Err()))
		}
		return check()
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, p.LogTail())
	}
	return nil
}
