package nftables

import (
	"github.com/portico-lb/portico/nodeproxy/rules"
)

// genTracker follows nf_tables' generation for all families of a Proxier (the generation is
// one per network namespace): gen is the generation after the agent's last commit, and clean
// holds the families whose table is known to be as the agent wrote it since then.
type genTracker struct {
	conns *conns
	gen   uint32
	has   bool
	clean map[rules.Family]bool
}

// undrifted reports whether family f's table is as the agent left it: no commit by anyone else
// since the agent's last one, and f fully written since the last foreign commit.
func (g *genTracker) undrifted(f rules.Family) bool {
	cur, err := g.conns.generation()
	if err != nil {
		g.has = false
		clear(g.clean)
		return false
	}
	if !g.has || cur != g.gen {
		// Someone else committed: every family is rewritten once before it is trusted again.
		g.gen, g.has = cur, true
		clear(g.clean)
		return false
	}
	return g.clean[f]
}

// committed records a commit of family f (full: the whole table rewritten) that moved the
// generation from before to after (ok: both were read).
func (g *genTracker) committed(f rules.Family, before, after uint32, ok, full bool) {
	switch {
	case !ok:
		g.has = false
		clear(g.clean)
	case after == before:
		// nothing committed
	case after == before+1 && g.has && before == g.gen:
		g.gen = after
		if full {
			g.clean[f] = true
		}
	default:
		// Other commits came before (or around) the agent's own.
		clear(g.clean)
		g.gen, g.has = after, after == before+1
		if full && g.has {
			g.clean[f] = true
		}
	}
}
