package kubetest

import (
	"context"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Collector plays, for one namespace and the kinds it lists, the garbage
// collector of kube-controller-manager, which envtest lacks: an object
// whose owner is gone is deleted; an object deleted in the foreground
// (finalizer foregroundDeletion) has its dependents deleted and loses
// the finalizer once they are gone. Only owners of the listed kinds are
// judged: a dependent of an unlisted kind's object is left alone. Jobs
// and their pods are the Kubelet's; leave batch/v1 Job out.
type Collector struct {
	// Client is an administrator's.
	Client    client.Client
	Namespace string
	// Kinds are the kinds collected, as list kinds are found from them
	// (Kind + "List").
	Kinds []schema.GroupVersionKind

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// Start runs the collector until ctx ends or Stop.
func (c *Collector) Start(ctx context.Context) {
	ctx, c.stop = context.WithCancel(ctx)
	c.wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			c.sync(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
}

// Stop stops the collector and waits for it.
func (c *Collector) Stop() {
	c.stop()
	c.wg.Wait()
}

// ownerKey is an owner as a reference names it: group, kind, uid.
type ownerKey struct {
	group, kind string
	uid         types.UID
}

func (c *Collector) sync(ctx context.Context) {
	var objs []*metav1.PartialObjectMetadata
	live := map[ownerKey]bool{}
	kinds := map[schema.GroupKind]bool{}
	for _, gvk := range c.Kinds {
		kinds[gvk.GroupKind()] = true
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.Client.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
			return // a failed read judges nothing
		}
		for i := range list.Items {
			o := &list.Items[i]
			o.SetGroupVersionKind(gvk)
			objs = append(objs, o)
			live[ownerKey{gvk.Group, gvk.Kind, o.UID}] = true
		}
	}
	dependents := map[types.UID][]*metav1.PartialObjectMetadata{}
	for _, o := range objs {
		for _, ref := range o.OwnerReferences {
			dependents[ref.UID] = append(dependents[ref.UID], o)
		}
	}
	for _, o := range objs {
		if o.DeletionTimestamp != nil {
			if slices.Contains(o.Finalizers, metav1.FinalizerDeleteDependents) {
				c.foreground(ctx, o, dependents[o.UID])
			}
			continue
		}
		if len(o.OwnerReferences) == 0 {
			continue
		}
		orphan := true
		for _, ref := range o.OwnerReferences {
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil || !kinds[gv.WithKind(ref.Kind).GroupKind()] || live[ownerKey{gv.Group, ref.Kind, ref.UID}] {
				orphan = false
			}
		}
		// The lists are not one snapshot: an owner made after its
		// kind was listed is missing from them. As the real collector
		// does, ask for each owner before deleting.
		if orphan && !c.ownersGone(ctx, o) {
			orphan = false
		}
		if orphan {
			c.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}
	}
}

// foreground deletes o's dependents, then, when none is left, removes
// the finalizer that held o.
func (c *Collector) foreground(ctx context.Context, o *metav1.PartialObjectMetadata, deps []*metav1.PartialObjectMetadata) {
	if len(deps) > 0 {
		for _, d := range deps {
			if d.DeletionTimestamp == nil {
				c.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground))
			}
		}
		return
	}
	patch := client.MergeFrom(o.DeepCopy())
	o.Finalizers = slices.DeleteFunc(slices.Clone(o.Finalizers), func(f string) bool { return f == metav1.FinalizerDeleteDependents })
	c.Client.Patch(ctx, o, patch)
}

// ownersGone says every owner of o is confirmed missing (or replaced by
// an object of another uid) by a read of the API server.
func (c *Collector) ownersGone(ctx context.Context, o *metav1.PartialObjectMetadata) bool {
	for _, ref := range o.OwnerReferences {
		owner := &metav1.PartialObjectMetadata{}
		owner.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
		err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}, owner)
		if err == nil && owner.UID == ref.UID || err != nil && !apierrors.IsNotFound(err) {
			return false
		}
	}
	return true
}
