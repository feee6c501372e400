package nftables

import (
	"net/netip"
	"testing"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// TestForgetExprs: once committed, the retained rules keep their text only; an unchanged port
// writes nothing on the next sync, and a changed one is written from its fresh rendering, with
// expressions.
func TestForgetExprs(t *testing.T) {
	cfg := &config{fam: familyOf(rules.IPv4), mark: 0x1000}
	sp := func(eps ...rules.Endpoint) *rules.ServicePort {
		return &rules.ServicePort{Namespace: "ns", Name: "web", PortName: "http", Protocol: "tcp",
			ClusterIP: netip.MustParseAddr("198.18.0.10"), Port: 80, Endpoints: eps}
	}
	p := &familyProxier{fam: cfg.fam, cfg: *cfg}
	p.hairpin = map[netip.Addr]int{}
	p.ports, p.elems, p.claims = map[string]*portState{}, map[string]map[string]string{}, map[string]map[string]map[string]string{}
	for _, m := range elemMaps {
		p.elems[m], p.claims[m] = map[string]string{}, map[string]map[string]string{}
	}
	two := sp(ep("198.19.1.1", false), ep("198.19.1.2", false))
	p.update(newTransaction(p.fam), two.Key(), render(cfg, two))
	p.forgetExprs()
	kept := 0
	for _, rs := range p.ports[two.Key()].chains {
		for _, r := range rs {
			kept += len(r.exprs)
			if r.text == "" {
				t.Errorf("rule lost its text")
			}
		}
	}
	if kept != 0 || p.rendered != nil {
		t.Errorf("%d expressions kept after the commit (rendered %d)", kept, len(p.rendered))
	}

	tx := newTransaction(p.fam)
	p.update(tx, two.Key(), render(cfg, two))
	if len(tx.writes) != 0 {
		t.Errorf("an unchanged port wrote chains %v", tx.writes)
	}
	one := sp(ep("198.19.1.1", false))
	tx = newTransaction(p.fam)
	p.update(tx, one.Key(), render(cfg, one))
	if len(tx.writes) == 0 {
		t.Fatal("a changed port wrote nothing")
	}
	for name, w := range tx.writes {
		for _, r := range w.rules {
			if len(r.exprs) == 0 {
				t.Errorf("chain %s written without expressions: %q", name, r.text)
			}
		}
	}
}
