package controllers

import (
	"context"
	"encoding/json"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ownLease makes the controller's Deployment (ns/deployment) the owner of its leader-election
// Lease (ns/lease), creating the Lease when it is missing and adding the reference to one an
// earlier version created. The garbage collector then deletes the Lease once the Deployment is
// gone: `helm uninstall` (or a GitOps prune) leaves no Lease behind, while a restart or a
// rolling update keeps it. Leader election takes an existing Lease with no holder as free.
func ownLease(ctx context.Context, cs kubernetes.Interface, ns, lease, deployment string) error {
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the controller's Deployment %s/%s (--deployment), the owner of its leader-election Lease: %w", ns, deployment, err)
	}
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID}
	leases := cs.CoordinationV1().Leases(ns)
	for range 3 {
		l, err := leases.Get(ctx, lease, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Name: lease, Namespace: ns, OwnerReferences: []metav1.OwnerReference{ref}}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue // a replica created it meanwhile: read it again
			}
			if err != nil {
				return fmt.Errorf("creating the leader-election Lease %s/%s: %w", ns, lease, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the leader-election Lease %s/%s: %w", ns, lease, err)
		}
		for _, o := range l.OwnerReferences {
			if o.UID == ref.UID {
				return nil
			}
		}
		// The Lease of this Deployment's earlier controller, or of a Deployment deleted and
		// created again: this one owns it now.
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": l.ResourceVersion, "ownerReferences": []metav1.OwnerReference{ref}}})
		if err != nil {
			return err
		}
		_, err = leases.Patch(ctx, lease, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("making Deployment %s/%s the owner of the leader-election Lease: %w", ns, deployment, err)
		}
		return nil
	}
	return fmt.Errorf("the leader-election Lease %s/%s kept changing while its owner was set", ns, lease)
}

// ownedLeaseLock is client-go's Lease lock whose Create gives the Lease its owner, the
// controller's Deployment as it is at that moment: a Lease deleted under a running
// controller (the garbage collector acting on an uninstall's foreground deletion before the
// pods stop) is created again only while the Deployment exists, and then owned by it.
type ownedLeaseLock struct {
	*resourcelock.LeaseLock
	cs         kubernetes.Interface
	deployment string
}

// newOwnedLeaseLock is the leader-election lock of cfg's Lease, held under identity, owned by
// cfg's Deployment.
func newOwnedLeaseLock(cs kubernetes.Interface, ns, lease, deployment, identity string) *ownedLeaseLock {
	return &ownedLeaseLock{
		LeaseLock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: lease},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		cs: cs, deployment: deployment,
	}
}

func (l *ownedLeaseLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	ns := l.LeaseMeta.Namespace
	d, err := l.cs.AppsV1().Deployments(ns).Get(ctx, l.deployment, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Deployment %s/%s, the owner of the Lease to create: %w", ns, l.deployment, err)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.LeaseMeta.Name, Namespace: ns, Labels: l.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID}}},
		Spec: resourcelock.LeaderElectionRecordToLeaseSpec(&ler),
	}
	if _, err := l.Client.Leases(ns).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The embedded lock updates the object its last Get read.
	_, _, err = l.LeaseLock.Get(ctx)
	return err
}
