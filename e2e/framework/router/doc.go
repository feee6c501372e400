// Package router gives the end-to-end suites and the demo a real BGP router: bird2 running in
// a netlab namespace, configured from a Config (one eBGP session per Neighbor, optional MD5
// and BFD per neighbour, kernel protocols that install the learned routes with all their next
// hops, so the router's own kernel forwards by ECMP), read back with birdc (Routes, NextHops,
// WaitNextHops), reconfigured in place (Reconfigure: `birdc configure`) or restarted with a new
// configuration (Restart), and stopped with the lab. AddOutside adds a client namespace behind the router: a veth from the router to
// "<lab id>-outside" on the lab slot's spare 13th /24 (and /64), so that its traffic to a VIP
// goes through the routes the router learned.
//
// Everything it creates belongs to the lab: bird is a lab process (killed by Lab.Close) and
// the outside namespace carries the lab's name prefix, so Lab.Close and netlab.Sweep remove
// it with the lab's own namespaces. Needs root, iproute2 and bird2 (`make prereqs`).
package router
