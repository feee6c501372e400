package nftables

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// TestForgetExprs: once committed, the retained rules keep their text only; an unchanged port
// writes nothing on the next sync, a moved endpoint only its element of the endpoints map, and
// a changed chain is written from its fresh rendering, with expressions.
func TestForgetExprs(t *testing.T) {
	cfg := &config{fam: familyOf(rules.IPv4), mark: 0x1000}
	sp := func(eps ...rules.Endpoint) *rules.ServicePort {
		return &rules.ServicePort{Namespace: "ns", Name: "web", PortName: "http", Protocol: "tcp",
			ClusterIP: netip.MustParseAddr("198.18.0.10"), Port: 80, Endpoints: eps}
	}
	p := &familyProxier{fam: cfg.fam}
	p.ranges.reset()
	cfg.endpointRange = p.ranges.get
	p.cfg = *cfg
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
	// Another endpoint in place of one (as many as before): a change of elements only, the
	// one at that index.
	moved := sp(ep("198.19.1.1", false), ep("198.19.1.3", false))
	tx = newTransaction(p.fam)
	p.update(tx, moved.Key(), render(cfg, moved))
	m := endpointMaps[endpointShard("int-ns/web/tcp/http")]
	if len(tx.writes) != 0 || len(tx.elemDels[m]) != 1 || len(tx.elemAdds[m]) != 1 {
		t.Errorf("one endpoint moved: chains %v, endpoint elements deleted %d, added %d, want none, 1, 1",
			tx.writes, len(tx.elemDels[m]), len(tx.elemAdds[m]))
	}
	p.forgetExprs()
	p.ranges.committed()
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

// TestEndpointRanges: a chain keeps its range while its endpoints fit, moves to a larger one
// when they outgrow it, and a freed range is reused only after the commit; chains of one shard
// get distinct ranges.
func TestEndpointRanges(t *testing.T) {
	var r endpointRanges
	r.reset()
	// Chains of one shard.
	var names []string
	for i := 0; len(names) < 4; i++ {
		if n := fmt.Sprintf("int-ns/s%d/tcp", i); endpointShard(n) == 0 {
			names = append(names, n)
		}
	}
	a, b, c, d := names[0], names[1], names[2], names[3]
	_, ra := r.get(a, 10)
	if set, rb := r.get(b, 3); rb != ra+minRange || set != endpointMaps[0] {
		t.Errorf("b at %s %d, want %s %d", set, rb, endpointMaps[0], ra+minRange)
	}
	if _, again := r.get(a, 16); again != ra {
		t.Errorf("a moved from %d to %d with 16 endpoints", ra, again)
	}
	if _, grown := r.get(a, 17); grown == ra || grown < ra+2*minRange {
		t.Errorf("a with 17 endpoints at %d (was %d)", grown, ra)
	}
	if _, rc := r.get(c, 1); rc == ra {
		t.Errorf("c reused a's old range %d before the commit", ra)
	}
	r.committed()
	if _, rd := r.get(d, 2); rd != ra {
		t.Errorf("d at %d, want a's freed range %d", rd, ra)
	}
}
