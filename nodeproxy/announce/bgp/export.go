package bgp

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/osrg/gobgp/v4/api"
)

// Per-peer export. GoBGP applies per-neighbour policies to route-server clients only (its
// toPolicyInfo refuses others), and a route-server client would get our paths without our AS
// in the path and without the next hop rewritten. So the speaker uses the global export
// policy, which GoBGP evaluates once per destination peer with that peer as the neighbour of
// a neighbour-set condition:
//
//   - default action reject: a prefix goes to no peer unless a statement accepts it;
//   - per peer, a policy "portico-export-<address>" with one statement that accepts the paths
//     whose destination is that peer (neighbour set "portico-peer-<address>") and whose prefix
//     is in that peer's prefix set ("portico-prefixes-<address>", exact lengths).
//
// A peer's prefix set holds the prefixes advertised to it. It is edited in place (GoBGP's
// append and remove; "replace" would swap the object under the live condition), before
// AddPath for new prefixes, so that a new path is exported right on its first evaluation.
// When the set of peers of an already announced prefix changes, a soft reset out of each
// affected peer re-evaluates what it was sent: GoBGP then sends the newly allowed prefixes and
// withdraws those the policy now rejects. Withdrawals pass export policies unchanged in GoBGP,
// so deleting a path reaches every peer that had it.

// exportNames names the parts of the global export policy that belong to one peer.
func exportNames(addr netip.Addr) (policy, neighborSet, prefixSet string) {
	a := addr.String()
	return "portico-export-" + a, "portico-peer-" + a, "portico-prefixes-" + a
}

// setExportDefault makes the global export policy reject by default (no peer policy yet).
func (s *Speaker) setExportDefault(ctx context.Context) error {
	return s.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name:          "global",
		Direction:     api.PolicyDirection_POLICY_DIRECTION_EXPORT,
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}})
}

// exportFor is the set of prefixes of advs that go to the peer at addr.
func exportFor(addr netip.Addr, advs map[netip.Prefix]Advertisement) map[netip.Prefix]bool {
	out := map[netip.Prefix]bool{}
	for p, a := range advs {
		if a.sendsTo(addr) {
			out[p] = true
		}
	}
	return out
}

func prefixSet(name string, prefixes []netip.Prefix) *api.DefinedSet {
	ds := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: name}
	for _, p := range prefixes {
		ds.Prefixes = append(ds.Prefixes, &api.Prefix{IpPrefix: p.String(), MaskLengthMin: uint32(p.Bits()), MaskLengthMax: uint32(p.Bits())})
	}
	return ds
}

// addExport creates the peer's export policy, allowing prefixes, and appends it to the global
// export assignment. Call it before AddPeer.
func (s *Speaker) addExport(ctx context.Context, addr netip.Addr, prefixes map[netip.Prefix]bool) error {
	policy, nset, pset := exportNames(addr)
	if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
		DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: nset, List: []string{netip.PrefixFrom(addr, addr.BitLen()).String()},
	}}); err != nil {
		return fmt.Errorf("adding neighbour set %s: %w", nset, err)
	}
	list := slices.SortedFunc(maps.Keys(prefixes), netip.Prefix.Compare)
	if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: prefixSet(pset, list)}); err != nil {
		return fmt.Errorf("adding prefix set %s: %w", pset, err)
	}
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: policy, Statements: []*api.Statement{{
		Name: policy,
		Conditions: &api.Conditions{
			NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: nset},
			PrefixSet:   &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: pset},
		},
		Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
	}}}}); err != nil {
		return fmt.Errorf("adding policy %s: %w", policy, err)
	}
	if err := s.srv.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name:          "global",
		Direction:     api.PolicyDirection_POLICY_DIRECTION_EXPORT,
		Policies:      []*api.Policy{{Name: policy}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}}); err != nil {
		return fmt.Errorf("assigning policy %s: %w", policy, err)
	}
	s.exported[addr] = prefixes
	return nil
}

// removeExport undoes addExport. Call it after DeletePeer.
func (s *Speaker) removeExport(ctx context.Context, addr netip.Addr) error {
	policy, nset, pset := exportNames(addr)
	if err := s.srv.DeletePolicyAssignment(ctx, &api.DeletePolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name:      "global",
		Direction: api.PolicyDirection_POLICY_DIRECTION_EXPORT,
		Policies:  []*api.Policy{{Name: policy}},
	}}); err != nil {
		return fmt.Errorf("unassigning policy %s: %w", policy, err)
	}
	if err := s.srv.DeletePolicy(ctx, &api.DeletePolicyRequest{Policy: &api.Policy{Name: policy}, All: true}); err != nil {
		return fmt.Errorf("deleting policy %s: %w", policy, err)
	}
	for _, ds := range []*api.DefinedSet{
		{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: pset},
		{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: nset},
	} {
		if err := s.srv.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{DefinedSet: ds, All: true}); err != nil {
			return fmt.Errorf("deleting defined set %s: %w", ds.Name, err)
		}
	}
	delete(s.exported, addr)
	return nil
}

// updateExport makes the peer's prefix set want, in place, and returns what it added and
// removed.
func (s *Speaker) updateExport(ctx context.Context, addr netip.Addr, want map[netip.Prefix]bool) (added, removed []netip.Prefix, err error) {
	have := s.exported[addr]
	for p := range want {
		if !have[p] {
			added = append(added, p)
		}
	}
	for p := range have {
		if !want[p] {
			removed = append(removed, p)
		}
	}
	slices.SortFunc(added, netip.Prefix.Compare)
	slices.SortFunc(removed, netip.Prefix.Compare)
	_, _, pset := exportNames(addr)
	if len(added) > 0 {
		if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: prefixSet(pset, added)}); err != nil {
			return nil, nil, fmt.Errorf("adding to prefix set %s: %w", pset, err)
		}
		for _, p := range added {
			have[p] = true
		}
	}
	if len(removed) > 0 {
		if err := s.srv.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{DefinedSet: prefixSet(pset, removed)}); err != nil {
			return added, nil, fmt.Errorf("removing from prefix set %s: %w", pset, err)
		}
		for _, p := range removed {
			delete(have, p)
		}
	}
	return added, removed, nil
}

// resetOut re-evaluates the export policy for what the peer at addr was sent (soft reset out,
// no session reset): newly allowed prefixes are sent, newly rejected ones withdrawn.
func (s *Speaker) resetOut(ctx context.Context, addr netip.Addr) error {
	if err := s.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: addr.String(), Soft: true,
		Direction: api.ResetPeerRequest_DIRECTION_OUT}); err != nil {
		return fmt.Errorf("re-sending to peer %s: %w", addr, err)
	}
	return nil
}
