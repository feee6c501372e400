// Package tracker is portico-agent's change tracker: informers on Services, EndpointSlices
// (indexed by Service) and this Node. Informer events only record which Services changed (and
// whether the Node's addresses or zone changed, which concerns every Service) and call notify;
// the sync loop Takes the changes, and Restores them when a sync fails.
//
// It owns State, the view every consumer of the sync loop reads on one sync (the changed
// Services, whether the sync is full, this Node, and read access to every tracked object through
// a Store), and CacheStore, the Store over informer caches, which tests fill by hand. It never
// computes rules.
//
// It also keeps the trigger times of EndpointSlice changes (Trigger) for the network programming
// latency (ProgrammingLatency), and its informers drop what no consumer reads before objects
// reach the caches (strip: managedFields, unused annotations, a Node's image list).
package tracker
