// Package tracker is portico-agent's change tracker: informers on Services, EndpointSlices
// (indexed by Service) and this Node. Informer events only record which Services changed (and
// whether the Node's addresses or zone changed, which concerns every Service) and call notify;
// the sync loop Takes the changes, and Restores them when a sync fails.
//
// It owns State, the view every consumer of the sync loop reads on one sync (the changed
// Services, whether the sync is full, this Node, and read access to every tracked object through
// a Store), and CacheStore, the Store over informer caches, which tests fill by hand. It never
// computes rules.
package tracker
