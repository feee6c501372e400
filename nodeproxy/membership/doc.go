// Package membership tells portico-agent which nodes are alive, in well under a second, without
// the Kubernetes API (node leases take 40 s to turn a node NotReady). Every agent runs a
// hashicorp/memberlist member named after its Node, bound to the node's IP; the members probe
// each other over UDP (SWIM with Lifeguard's suspicion) and gossip what they learn. The package
// exposes a view, the set of alive node names, the nodes that were alive and left it (Dead:
// failed or left gracefully; memberlist v0.5.4's leave notification does not tell them apart),
// and a channel that signals each change. Package election turns the view into announcers;
// portico-agent also leaves endpoints on Dead nodes out of its rules (package announce).
//
// # Timings and the detection math
//
// memberlist's LAN defaults (probe every 1 s, 500 ms probe timeout, suspicion multiplier 4) take
// about 5.5-6.5 s to declare a node dead (MetalLB measures about 4 s of suspicion alone). On one
// LAN a UDP round trip is well under a millisecond, so DefaultTimings probes ten times as often:
//
//	ProbeInterval  P = 100 ms   each member probes one other member per P (round robin)
//	ProbeTimeout   T =  50 ms   direct ack wait; then indirect probes until P has passed
//	SuspicionMult  S = 4        suspicion lasts S * max(1, log10(n)) * P = 400 ms for n <= 10
//	SuspicionMaxTimeoutMult = 2 with k = S-2 expected confirmations (n >= 4), the timer starts at
//	                            2 * 400 ms and falls to 400 ms as other members confirm
//	GossipInterval = 50 ms      dead/suspect news reaches GossipNodes (3) peers per interval
//
// A member that dies is found by the next probe aimed at it. Each of the n-1 survivors walks a
// shuffled list of the n-1 others, so each reaches the dead one within (n-1)P; with 3 nodes the
// earlier of the two survivors probes it after about 2P/3 = 67 ms on average, 200 ms at worst.
// That probe fails after P (100 ms), the prober suspects the node and gossips it; the suspicion
// expires after S*P = 400 ms (n <= 3: no confirmations are expected, the minimum applies), and
// the prober declares the node dead and gossips that within a gossip interval (50 ms) to the
// others. Expected detection: about 0.07 + 0.1 + 0.4 + 0.05 = 0.6 s; worst about 0.2 + 0.1 +
// 0.4 + 0.05 = 0.75 s, plus scheduling delays. For 4 <= n <= 10 the first probe comes later
// ((n-1)P/(n-1 probers), still about P on average) and the suspicion falls from 800 ms to 400 ms
// once S-2 = 2 other members have confirmed it by their own failed probes. A live member wrongly
// suspected (a stalled process) refutes the suspicion when it hears of it, which it has 400 ms
// to do; Lifeguard's awareness also slows down the probes of a member that is itself slow.
// Measured in e2e/suites/l2election (3 nodes, 10 trials per failure, 2-core machine): the client is
// served by the next node 0.55-0.75 s after a kill, an abrupt stop or a link cut.
//
// # Asking a node to announce again
//
// A live member wrongly declared dead (a stall longer than the suspicion time) never sees
// itself dead: it refutes and is alive again in the others' views, but in the meantime
// another node may have taken its VIPs and told the clients so. AskReassert sends the member
// a one-byte user message (memberlist's reliable stream, encrypted with the key like every
// other message), and ReassertAsked fires on its side; the layer-2 announcer sends it to the
// next owner of every VIP it withdraws and answers it with a new round of gratuitous
// announcements.
//
// # Peers, rejoining and leaving
//
// SetPeers takes the addresses of the other nodes (their Node InternalIPs) and returns at once;
// the rejoin loop joins the ones not alive in the view, at once and again every
// RejoinInterval, so that a node that restarted, or a side of a healed partition, merges back
// without help. Each missing peer is joined by memberlist's Join in a goroutine of its own (one
// at a time per peer): memberlist waits up to its TCP timeout (10 s) for a peer that does not
// answer, which then delays only that peer's join. A peer whose joins fail is tried again with
// client-go's per-key exponential back-off, from RejoinInterval up to 4 RejoinIntervals. Stop leaves gracefully (the others
// drop the node at once instead of after the detection time), then shuts down; Abort shuts down
// without leaving, as a crash would.
//
// # Restarts
//
// Restart(hold) is the third way out, for an agent that stops to come back (a pod replaced by
// a rolling update, a restart): the node's dataplane lives in the kernel and keeps serving
// without the agent, so its VIPs should stay where they are. The member publishes a hold in its
// node metadata (memberlist's node meta, gossiped as an alive message with a new incarnation;
// Restart waits up to its timeout for that broadcast), then shuts down without leaving. Every
// other member records the hold when the update reaches it (the deadline is its own receive
// time plus the hold: no clocks are compared); when the failure detector then drops the node,
// the member keeps it in its view (Alive; Held lists such nodes; it is not Dead) until the node
// is back (its new member refutes the old incarnation: a join, or an update without a hold,
// ends the hold at once) or the hold has passed, after which it is dead as after a crash.
// Elections therefore keep the node as the VIPs' owner, and endpoints on it stay in the rules.
// A member that joins while another is held learns the hold from the member it joins (the
// push-pull state carries the holds and the time left of each), so that it does not elect
// without that node. A crash (no Restart) is found by the failure detector as before.
// The cost: a node that announces a restart and then does not come back (the node itself
// lost meanwhile) keeps its VIPs unanswered until the hold ends.
//
// # Keys and their rotation
//
// With a key every packet and stream is encrypted and authenticated with AES-GCM. The member's
// keys sit in memberlist's keyring: the primary (Config.SecretKey) encrypts what it sends, and
// every key of the ring (Config.ExtraKeys besides) is tried on what it receives. A key is the
// SHA-256 of a secret of any length (DeriveKey), so any string works; Fingerprint names a key
// (the first 8 hex digits of its SHA-256) in logs and metrics without revealing it. Members
// that share no key cannot join each other.
//
// SetKeys replaces the ring while the member runs (add the new keys, switch the primary, remove
// the rest), which makes a rotation possible without a restart: every agent reads its keys
// from one Secret and follows it (package nodeproxy, membershipkeys.go: data key "secret" is
// the primary, "secret-*" the extra keys). Rotating from key A to key B takes three edits of
// the Secret, each awaited on every agent before the next:
//
//  1. add B as an extra key: every member still sends with A and accepts A and B;
//  2. make B the primary and keep A as an extra key: members that have this step send with B,
//     the others still with A, and every member accepts both;
//  3. remove A: every member sends with B already, so nothing sent with A is left.
//
// At no moment does a member send with a key another member does not accept, so no probe
// fails, no node is suspected and nothing moves. Replacing A by B at once is not safe:
// between two members' updates neither understands the other, and a member whose update comes
// later than the suspicion time (400 ms) is declared dead, its VIPs moved. "Awaited on every agent" is
// what metric portico_agent_membership_keys shows (the fingerprints per agent); the watch
// brings an edit to every agent within a fraction of a second (e2e/suites/l2 TestL2GossipKey
// measures it) and docs/membership.md gives the commands.
//
// A message that no key of the ring decrypts (a member with another key, or none) is reported
// to Config.DecryptFailed: memberlist v0.5.4 says so only in a log line (no error type, no
// metric), so the member recognises its texts as they pass through the logger (logWriter).
// The agent counts them in portico_agent_membership_decrypt_failures_total and reports them
// as MembershipDecryptFailed Events on its Node.
package membership
