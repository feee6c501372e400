// Package bgp announces load-balancer VIPs from one node to BGP routers. It owns a Speaker:
// GoBGP v4 (github.com/osrg/gobgp/v4, pkg/server) running inside portico-agent, with GoBGP's
// native single-hop BFD. It does not decide which VIPs a node announces or to whom; it takes
// the complete desired state and makes the sessions match it.
//
// # Inputs: the full desired state, every time
//
// Like MetalLB's Session.Set, both inputs are declarative and complete:
//
//   - SetPeers([]Peer): the node's BGP neighbours (address, ASN, our ASN, port, hold and
//     keepalive, MD5 password, BFD intervals and multiplier, eBGP multihop TTL). Peers are keyed
//     by address; a new one is added, a missing one removed (its session ends with a Cease
//     NOTIFICATION), a changed one restarted.
//   - SetAdvertisements([]Advertisement): the prefixes to announce (a VIP's /32 or /128) with
//     standard and large communities and local preference, each to the peers it lists (empty:
//     every peer of its family). Only the difference to the last call reaches GoBGP: withdrawn
//     prefixes are deleted, new or changed ones added, and a prefix whose peers changed is sent
//     to the peers that gained it and withdrawn from those that lost it.
//
// Invalid input (bad ASN, hold time under 3 s, BFD with multihop, duplicate addresses or
// prefixes, host bits set) is rejected as a whole with every problem listed, and nothing moves.
// The router ID is fixed at New (the node's IPv4 address).
//
// # Peering model
//
// One session per address family: an IPv4 peer address carries IPv4 unicast only, an IPv6 peer
// address IPv6 unicast only (MP-BGP, AFI 2). Each prefix goes to the established peers of its
// family that it selects. We chose this over multiprotocol on one session because the next hop then needs no
// configuration: every path is added with the unspecified next hop (0.0.0.0 or ::), which GoBGP
// replaces per session with the session's local address, so each router learns this node's
// address on the router's own segment, of the right family. A dual-stack router is two Peers.
//
// The speaker learns nothing: its global import policy accepts only local paths, so no route of
// one peer is ever passed on to another.
//
// # Per-peer export (export.go)
//
// GoBGP keeps per-neighbour policies for route-server clients only, which would send our paths
// without our AS and with the next hop unchanged. So the speaker uses the global export policy,
// which GoBGP evaluates per destination peer: default reject, and per peer one statement that
// accepts paths to that neighbour (a one-address neighbour set) whose prefix is in that peer's
// prefix set. Prefix sets are edited in place before new paths are added, so a new prefix goes
// out to exactly its peers at once; when an announced prefix's peers change, a soft reset out
// of each affected peer sends what it newly may have and withdraws what it may no longer have.
// The sessions are not reset. TestPerPeerExport checks it against bird with two sessions. By default it does not listen (it only dials out), so
// it can share a node with another BGP daemon on port 179; Options.ListenPort turns listening
// on. GoBGP's BFD endpoint always binds UDP 3784 in the agent's namespace, so a node cannot run
// another BFD daemon beside it. GoBGP's BFD is single-hop only, without authentication or echo.
// GoBGP resets a peer when BFD goes down by queueing a NOTIFICATION that only an established
// session sends; one queued while the session is down kills the next session at once, and
// against bird (which drops its BFD session with the BGP session) that repeats for ever. A
// guard (bfdguard.go) deletes and re-adds a peer whose BFD fell while its session was down.
//
// LOCAL_PREF is sent as given; it only means something to iBGP peers (eBGP routers ignore it).
//
// # Shutdown
//
// Stop(ctx) is graceful and bounded by ctx: it withdraws every prefix, waits until each
// established session has sent the UPDATE that carries the withdrawals, then closes every
// session with a Cease NOTIFICATION (peer de-configured) and stops GoBGP. When Stop returns the
// routers have been told; the lab test checks the router holds no route of the node right after
// the speaker process exits.
//
// StopForRestart(ctx) is the stop for a restart of this process with BGP graceful restart
// (RFC 4724, Peer.GracefulRestart): it withdraws nothing and closes the sessions that negotiated
// graceful restart without a NOTIFICATION (GoBGP's StopBgp with AllowGracefulRestart), so a
// helping router keeps the routes, stale, for the restart time. The peers a new speaker adds in
// its first SetPeers say in their OPEN that it restarted with forwarding kept (Restart State
// and Forwarding State bits), so the router keeps the stale routes until this speaker has sent
// its own and End-of-RIB; GoBGP holds them back until the peers' End-of-RIB, at most 10 s (the
// selection deferral). bird 2.0.12 ends a graceful restart when the peer's BFD session goes
// down (unless configured "bfd graceful"), so with BFD the routes go at BFD's detection time
// all the same (TestGracefulRestart). The Consumer stops for a restart only on a node that
// stays (eligible, not cordoned) while the agent is not being uninstalled (ConsumerOptions.Uninstalling).
//
// # Status and metrics
//
// Status reports per peer the session state (RFC 4271 names), the BFD state (Disabled without
// BFD) and the prefixes advertised to it, plus a sentence for a session that is not up. A wrong
// MD5 password cannot be told apart from a dead peer on the wire (the kernel drops the signed
// segments silently), so the sentence names both. Collector exports
// portico_agent_bgp_session_state{peer,state}, portico_agent_bgp_bfd_state{peer,state} (state
// sets: 1 for the current state), portico_agent_bgp_advertised_prefixes{peer},
// portico_agent_bgp_announced_prefixes, portico_agent_bgp_withdrawals_total and
// portico_agent_bgp_peer_recreations_total (the BFD guard's).
//
// # How the agent feeds it (Consumer, consumer.go)
//
// portico-agent --announce=bgp runs a Consumer in its sync loop (after the netfilter rules).
// The Consumer watches BGPPeers (its own informer; AddressPools, Services, EndpointSlices and
// Nodes come from the agent's tracker) and on every sync hands the speaker the full state:
//
//   - SetPeers: the BGPPeers whose nodeSelector matches this node, with the MD5 password from
//     the referenced Secret. Each referenced Secret has its own watch (a metadata.name field
//     selector, so that RBAC can grant list and watch by resourceNames: the agent reads no other
//     Secret); a change of its data asks for a sync, and a new password restarts the session
//     with it (TestPasswordRotation does the same against bird; TestSecretWatchWithManifestRBAC
//     runs the watch as portico-agent with deploy/agent.yaml's RBAC against a real
//     kube-apiserver). Watches of Secrets no longer referenced stop. A BGPPeer it cannot use (missing Secret or key, values the
//     speaker rejects, an address another BGPPeer has) is reported in this node's status entry
//     (session Invalid, or the live state plus a message) and an InvalidBGPPeer Event, and keeps
//     its last valid configuration, so nothing moves.
//   - SetAdvertisements: for each VIP of a pool with spec.announce.bgp (announce.Targets, shared
//     with the L2 announcer) whose nodeSelector matches this node and which selects at least one
//     of this node's peers of the VIP's family, the VIP's prefix at the pool's aggregation
//     length with its communities and local preference, sent only to those peers (the pool's
//     peers and peerSelector, addresspool.BGPSettings.PeerSelected). A selection that names a
//     BGPPeer that does not exist or matches none (BGPSettings.CheckPeers, the rule the
//     controller reports in BGPValid) counts as invalid. externalTrafficPolicy: Local: only while this node has
//     a ready local endpoint. Cluster: every selected node (the router spreads flows by ECMP).
//     An excluded node (servicerules.NodeEligible: the exclude label, deletion, the
//     ToBeDeletedByClusterAutoscaler taint) advertises nothing. A pool whose BGP settings are
//     invalid keeps its last valid settings (the controller reports them in BGPValid).
//
// The speaker starts at the first sync with a peer (router ID: the node's first IPv4
// address). Every second the Consumer writes this node's entry of each BGPPeer's status by
// server-side apply (field manager portico-agent/<node>) when it changed. On agent shutdown
// the agent calls Stop, bounded by 5 s.
//
// ConsumerOptions.NewSpeaker is the seam the consumer's unit tests fill with a fake.
//
// # Measured (lab: bird 2.0.12 in a router namespace, one speaker process per node namespace)
//
// Time from cutting a node's link (its switch port down) until bird has dropped that node's
// next hop for the VIP, 10 trials each:
//
//   - BFD 100 ms x 3 on both sides: median 249 ms, worst 305 ms (best 223 ms).
//   - no BFD, hold time 9 s (keepalive 3 s): median 8.33 s, worst 8.83 s (best 6.80 s).
//
// (2-core VM, bird polled with birdc every 5 ms, so figures include up to ~10 ms of polling.)
// The target (under 1 s with BFD) holds; MetalLB's FRR BFD defaults (300 ms x 3)
// would give about 0.9 s, and without BFD routers keep a dead node's route for the hold time.
//
// Reproduce with `go test -run '^$' -bench LinkCut -benchtime 1x ./nodeproxy/announce/bgp/`
// (PORTICO_BGP_TRIALS sets the number of trials; about 3 minutes for 10). A graceful Stop
// with two established sessions took about 10 ms in TestRouter.
package bgp
