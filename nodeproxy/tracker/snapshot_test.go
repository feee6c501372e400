package tracker

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// TestSnapshot: Services and slices are those of the last Refresh, whatever the caches hold
// since; a partial Refresh reads only the changed keys, a full one forgets the rest; after a
// failed read the next Refresh reads everything.
func TestSnapshot(t *testing.T) {
	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	slicesIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{SliceServiceIndex: SliceServiceKey})
	live := &failingStore{Store: NewCacheStore("node1", services, slicesIdx, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))}
	put := func(name, rv string) types.NamespacedName {
		_ = services.Update(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}})
		_ = slicesIdx.Update(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			ResourceVersion: rv, Labels: map[string]string{discoveryv1.LabelServiceName: name}}})
		return types.NamespacedName{Namespace: "ns", Name: name}
	}
	version := func(s *Snapshot, key types.NamespacedName) string {
		svc, eps, err := s.Service(key)
		if err != nil {
			t.Fatal(err)
		}
		if svc == nil {
			return "gone"
		}
		if len(eps) != 1 || eps[0].ResourceVersion != svc.ResourceVersion {
			t.Fatalf("%v: slices %v do not belong to Service version %s", key, eps, svc.ResourceVersion)
		}
		return svc.ResourceVersion
	}
	keys := func(s *Snapshot) []types.NamespacedName {
		k, err := s.Services()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	web, db := put("web", "1"), put("db", "1")
	s := NewSnapshot(live)
	if err := s.Refresh(false, nil); err != nil { // the first Refresh reads all, asked or not
		t.Fatal(err)
	}
	if got := keys(s); !slices.Equal(got, []types.NamespacedName{db, web}) {
		t.Fatalf("keys %v, want db and web", got)
	}

	put("web", "2")
	api := put("api", "1")
	if v := version(s, web); v != "1" || slices.Contains(keys(s), api) {
		t.Errorf("before Refresh: web at %s, keys %v; want version 1 and no api", v, keys(s))
	}
	if err := s.Refresh(false, map[types.NamespacedName]bool{web: true}); err != nil {
		t.Fatal(err)
	}
	if v := version(s, web); v != "2" || slices.Contains(keys(s), api) {
		t.Errorf("after a partial Refresh of web: web at %s, keys %v; want version 2 and no api", v, keys(s))
	}

	_ = services.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}})
	if err := s.Refresh(false, map[types.NamespacedName]bool{db: true, api: true}); err != nil {
		t.Fatal(err)
	}
	if got := keys(s); !slices.Equal(got, []types.NamespacedName{api, web}) || version(s, db) != "gone" {
		t.Errorf("after db's deletion and api's creation: keys %v, db %s", got, version(s, db))
	}

	put("web", "3")
	live.fail = true
	if err := s.Refresh(false, map[types.NamespacedName]bool{web: true}); err == nil {
		t.Fatal("Refresh hid the store's error")
	}
	live.fail = false
	put("api", "2") // not marked: only a Refresh that reads everything sees it
	if err := s.Refresh(false, map[types.NamespacedName]bool{web: true}); err != nil {
		t.Fatal(err)
	}
	if version(s, api) != "2" || version(s, web) != "3" {
		t.Errorf("after a failed Refresh the next one read api %s, web %s; want everything read again", version(s, api), version(s, web))
	}
}

type failingStore struct {
	Store
	fail bool
}

func (f *failingStore) Service(key types.NamespacedName) (*corev1.Service, []*discoveryv1.EndpointSlice, error) {
	if f.fail {
		return nil, nil, errors.New("index broken")
	}
	return f.Store.Service(key)
}
