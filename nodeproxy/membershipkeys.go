package nodeproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-lb/portico/nodeproxy/membership"
)

// The gossip keys' Secret (--membership-secret).
//
// The Secret is the one place the agents' keys live; no agent is configured with a key. At
// start each agent reads it; when it is missing and the agent may create it
// (--membership-create-secret), the agent creates it with a random key by a plain Create: the
// API server accepts exactly one Create of a name, so when agents race on a fresh install one
// wins and every other gets AlreadyExists and reads the winner's Secret. Every agent therefore
// starts with the same key, whatever the order they start in, and nothing is rendered by Helm:
// `helm template` is the same on every run. Then every agent watches the Secret (list and
// watch by name: the RBAC names that one Secret) and installs its keys in memberlist's keyring
// at once: data key "secret" is the primary (what the agent encrypts with), every data key
// named "secret-*" is accepted too when decrypting. Each value is a secret of any length; its
// SHA-256 is the AES-256 key (membership.DeriveKey). A Secret without a usable "secret" key
// changes nothing (an Event says why), and a deleted Secret leaves the keys as they are.
// The rotation procedure (add, promote, remove) is in package membership's doc.
const (
	secretKeyPrimary     = "secret"
	secretKeyExtraPrefix = "secret-"
	// reasonMembershipKeyInvalid: the Secret cannot be used; the agent keeps its keys.
	reasonMembershipKeyInvalid = "MembershipKeyInvalid"
	// reasonMembershipDecryptFailed: gossip from a peer that this agent cannot decrypt: the
	// peer holds another key (or none).
	reasonMembershipDecryptFailed = "MembershipDecryptFailed"
	// decryptEventEvery bounds the Events of one peer's failures.
	decryptEventEvery = time.Minute
	// randomSecretBytes is the entropy of a created key (base64 in the Secret).
	randomSecretBytes = 32
)

// gossipKeys are the keys a Secret holds: primary and the extra keys accepted, derived, with
// the data key names for the logs.
type gossipKeys struct {
	primary []byte
	extra   [][]byte
	names   []string // primary first
}

// keysFromSecret reads the keys of s: "secret" (required, not empty) and every "secret-*"
// (sorted by name; empty ones and repeats of a key are left out).
func keysFromSecret(s *corev1.Secret) (gossipKeys, error) {
	k := gossipKeys{primary: membership.DeriveKey(s.Data[secretKeyPrimary]), names: []string{secretKeyPrimary}}
	if k.primary == nil {
		return gossipKeys{}, fmt.Errorf("the Secret %s/%s has no data key %q, or it is empty: the agents keep their keys", s.Namespace, s.Name, secretKeyPrimary)
	}
	var names []string
	for name := range s.Data {
		if strings.HasPrefix(name, secretKeyExtraPrefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		key := membership.DeriveKey(s.Data[name])
		if key == nil || bytes.Equal(key, k.primary) || slices.ContainsFunc(k.extra, func(e []byte) bool { return bytes.Equal(e, key) }) {
			continue
		}
		k.extra = append(k.extra, key)
		k.names = append(k.names, name)
	}
	return k, nil
}

// fingerprints names k's keys, primary first (membership.Fingerprint).
func (k gossipKeys) fingerprints() []string {
	out := []string{membership.Fingerprint(k.primary)}
	for _, e := range k.extra {
		out = append(out, membership.Fingerprint(e))
	}
	return out
}

// newKeySecret is the Secret an agent creates when there is none: a random key, owned by
// owner (the agents' DaemonSet; nil: none).
func newKeySecret(namespace, name, node string, owner *metav1.OwnerReference) (*corev1.Secret, error) {
	b := make([]byte, randomSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("making a membership key: %w", err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels:      map[string]string{"app.kubernetes.io/name": "portico-agent", "app.kubernetes.io/part-of": "portico"},
			Annotations: map[string]string{"portico-lb.io/created-by": "portico-agent on node " + node}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{secretKeyPrimary: []byte(base64.StdEncoding.EncodeToString(b))},
	}
	if owner != nil {
		s.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return s, nil
}

// ensureKeySecret returns the Secret namespace/name, creating it with a random key (owned by
// owner, when not nil) when it is missing and create allows: one Create, and on AlreadyExists
// (another agent won the race) the winner's Secret. created says whether this call created it.
func ensureKeySecret(ctx context.Context, cs kubernetes.Interface, namespace, name, node string, create bool, owner *metav1.OwnerReference) (s *corev1.Secret, created bool, err error) {
	secrets := cs.CoreV1().Secrets(namespace)
	s, err = secrets.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return s, false, nil
	case !apierrors.IsNotFound(err):
		return nil, false, fmt.Errorf("reading the membership Secret %s/%s: %w", namespace, name, err)
	case !create:
		return nil, false, fmt.Errorf("the membership Secret %s/%s does not exist: create it (data key %q, any secret), or let the agents create it (--membership-create-secret)", namespace, name, secretKeyPrimary)
	}
	fresh, err := newKeySecret(namespace, name, node, owner)
	if err != nil {
		return nil, false, err
	}
	s, err = secrets.Create(ctx, fresh, metav1.CreateOptions{})
	if err == nil {
		return s, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, fmt.Errorf("creating the membership Secret %s/%s: %w", namespace, name, err)
	}
	if s, err = secrets.Get(ctx, name, metav1.GetOptions{}); err != nil {
		return nil, false, fmt.Errorf("reading the membership Secret %s/%s another agent created: %w", namespace, name, err)
	}
	return s, false, nil
}

// keySecretOwner is the owner of a Secret the agent creates: its DaemonSet (--daemonset) when
// it lives in the Secret's namespace, so that deleting the DaemonSet (helm uninstall) deletes
// the key with it (the garbage collector; no blockOwnerDeletion, which would need more
// rights). nil when there is none or it cannot be read (the Secret then stays after an
// uninstall; logged).
func (a *agent) keySecretOwner(ctx context.Context, namespace string) *metav1.OwnerReference {
	ns, name, ok := strings.Cut(a.cfg.DaemonSet, "/")
	if !ok || ns != namespace || a.cs == nil {
		return nil
	}
	ds, err := a.cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		a.log.Error(err, "Reading the agent's DaemonSet to own the membership Secret; a Secret created now outlives it")
		return nil
	}
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}
}

// keyMetrics show the keys an agent holds and the messages it could not decrypt.
type keyMetrics struct {
	keys           *prometheus.GaugeVec
	decryptFailure prometheus.Counter
}

func newKeyMetrics(reg prometheus.Registerer) *keyMetrics {
	m := &keyMetrics{
		keys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricsPrefix + "membership_keys",
			Help: "The keys in this agent's membership keyring (1 each), by fingerprint (the first 8 hex digits of the SHA-256 of the key) and whether it is the primary, the one it encrypts with; every key is accepted when decrypting."},
			[]string{"fingerprint", "primary"}),
		decryptFailure: prometheus.NewCounter(prometheus.CounterOpts{Name: metricsPrefix + "membership_decrypt_failures_total",
			Help: "Membership messages this agent could not decrypt with any of its keys (or that were not encrypted as it expects): a peer holds another key."}),
	}
	if reg != nil {
		reg.MustRegister(m.keys, m.decryptFailure)
	}
	return m
}

// setKeys shows keys (primary first).
func (m *keyMetrics) setKeys(keys [][]byte) {
	m.keys.Reset()
	for i, k := range keys {
		m.keys.WithLabelValues(membership.Fingerprint(k), fmt.Sprint(i == 0)).Set(1)
	}
}

// decryptReporter counts decryption failures and reports them as Warning Events on the
// agent's Node, at most one per peer per decryptEventEvery. memberlist calls it from its own
// goroutines: it never blocks (the recorder queues).
type decryptReporter struct {
	metrics *keyMetrics
	event   func(peer string) // nil: no Events
	mu      sync.Mutex
	last    map[string]time.Time
}

func (r *decryptReporter) failed(peer string) {
	r.metrics.decryptFailure.Inc()
	if r.event == nil {
		return
	}
	// A stream's address carries its ephemeral port: the host names the peer.
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	now := time.Now()
	r.mu.Lock()
	if t, ok := r.last[peer]; ok && now.Sub(t) < decryptEventEvery {
		r.mu.Unlock()
		return
	}
	r.last[peer] = now
	r.mu.Unlock()
	r.event(peer)
}

// newDecryptReporter reports to metrics and, with a recorder, as Events on the agent's Node.
func (a *agent) newDecryptReporter(metrics *keyMetrics, ev agentEvents) *decryptReporter {
	r := &decryptReporter{metrics: metrics, last: map[string]time.Time{}}
	if ev.recorder == nil {
		return r
	}
	source := "its key file"
	if s := a.cfg.Membership.Secret; s != "" {
		source = "Secret " + s
	}
	node := a.nodeRef()
	r.event = func(peer string) {
		ev.recorder.Eventf(node, nil, corev1.EventTypeWarning, reasonMembershipDecryptFailed, "Decrypt",
			"node %s's agent cannot decrypt membership messages from %s: that peer's agent holds another key than %s (or none); see portico_agent_membership_decrypt_failures_total",
			a.cfg.NodeName, peer, source)
	}
	return r
}

// nodeRef is the agent's Node, as Events about the node name it.
func (a *agent) nodeRef() *corev1.ObjectReference {
	ref := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: a.cfg.NodeName}
	if n := a.tracker.Store().Node(); n != nil {
		ref.UID = n.UID
	}
	return ref
}

// keyWatch keeps a running member's keyring equal to the Secret's keys.
type keyWatch struct {
	namespace, name string
	m               *membership.Membership
	log             logr.Logger
	metrics         *keyMetrics
	invalid         func(err error) // reports a Secret that cannot be used
}

// run watches the Secret (by name) until ctx ends.
func (w *keyWatch) run(ctx context.Context, cs kubernetes.Interface) {
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", w.name).String()
	}
	inf := coreinformers.NewFilteredSecretInformer(cs, w.namespace, 0, cache.Indexers{}, byName)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.apply(obj) },
		UpdateFunc: func(_, obj any) { w.apply(obj) },
		DeleteFunc: func(any) {
			w.log.Info("The membership Secret was deleted; keeping the keys held", "secret", w.namespace+"/"+w.name)
		},
	})
	inf.RunWithContext(ctx)
}

// apply installs the keys of obj (a Secret) unless the keyring holds them already.
func (w *keyWatch) apply(obj any) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	k, err := keysFromSecret(s)
	if err != nil {
		w.log.Error(err, "Ignoring the membership Secret")
		w.invalid(err)
		return
	}
	if sameKeys(w.m.Keys(), k) {
		return
	}
	if err := w.m.SetKeys(k.primary, k.extra); err != nil {
		w.log.Error(err, "Installing the membership keys")
		w.invalid(err)
		return
	}
	w.metrics.setKeys(w.m.Keys())
	w.log.Info("Membership keys changed", "secret", w.namespace+"/"+w.name, "resourceVersion", s.ResourceVersion,
		"dataKeys", k.names, "fingerprints", k.fingerprints())
}

// sameKeys reports whether held (primary first) holds k's primary first and k's keys in any
// order.
func sameKeys(held [][]byte, k gossipKeys) bool {
	if len(held) != 1+len(k.extra) || !bytes.Equal(held[0], k.primary) {
		return false
	}
	for _, e := range k.extra {
		if !slices.ContainsFunc(held[1:], func(h []byte) bool { return bytes.Equal(h, e) }) {
			return false
		}
	}
	return true
}
