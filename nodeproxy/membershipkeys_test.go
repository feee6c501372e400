package nodeproxy

import (
	"bytes"
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/portico-lb/portico/nodeproxy/membership"
)

func TestKeysFromSecret(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "portico-membership"}, Data: map[string][]byte{
		"secret": []byte("new\n"), "secret-old": []byte("old"), "secret-a": []byte("new"), "secret-empty": nil, "other": []byte("x")}}
	k, err := keysFromSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k.primary, membership.DeriveKey([]byte("new"))) || len(k.extra) != 1 || !bytes.Equal(k.extra[0], membership.DeriveKey([]byte("old"))) {
		t.Errorf("keys %v (%d extra), want new as primary and old as the only extra key", k.names, len(k.extra))
	}
	if !sameKeys([][]byte{k.primary, k.extra[0]}, k) || sameKeys([][]byte{k.extra[0], k.primary}, k) || sameKeys([][]byte{k.primary}, k) {
		t.Error("sameKeys")
	}
	delete(s.Data, "secret")
	if _, err := keysFromSecret(s); err == nil {
		t.Error("a Secret without its primary key was used")
	}
}

// TestEnsureKeySecretRace: agents starting together on a fresh install all end with the key of
// the one Secret created; without the right to create, a missing Secret is an error that says
// what to do.
func TestEnsureKeySecretRace(t *testing.T) {
	cs := fake.NewClientset()
	owner := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "portico-agent", UID: "uid-1"}
	const agents = 8
	keys := make([][]byte, agents)
	createdBy := make([]bool, agents)
	var wg sync.WaitGroup
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, created, err := ensureKeySecret(context.Background(), cs, "kube-system", "portico-membership", "node", true, owner)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i], createdBy[i] = s.Data["secret"], created
			if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != owner.UID {
				t.Errorf("agent %d: the Secret's owners %v, want the DaemonSet (gone with it at uninstall)", i, s.OwnerReferences)
			}
		}()
	}
	wg.Wait()
	n := 0
	for i := range agents {
		if createdBy[i] {
			n++
		}
		if !bytes.Equal(keys[i], keys[0]) || len(keys[i]) < 32 {
			t.Errorf("agent %d holds key %q, agent 0 %q", i, keys[i], keys[0])
		}
	}
	if n != 1 {
		t.Errorf("%d agents created the Secret, want 1", n)
	}
	_, _, err := ensureKeySecret(context.Background(), cs, "kube-system", "missing", "node", false, nil)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("--membership-create-secret")) {
		t.Errorf("a missing Secret without create: %v", err)
	}
}
