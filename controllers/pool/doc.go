// Package pool reconciles AddressPools: it validates every pool (bad ranges, overlaps with
// older pools) with the bare-metal provider's own rules and writes each pool's status
// (assigned and available addresses per family, Valid and Conflict conditions) when it
// changes, with an Event when a pool becomes invalid, conflicting or valid again. Assigned
// counts come from the Services' status, the record of who holds what. It never touches a
// Service: an invalid pool only stops serving new allocations.
package pool
