package main

import (
	"context"
	"fmt"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/reconcile"
)

// forgeGate asks next, then holds launches from a revision whose config
// selects another forge than the one the reconciler started with (among
// them, one the operator does not allow). next goes first so that it
// sees every revision, as the reviewed-merge gate's memory needs.
type forgeGate struct {
	allowed []desired.Forge
	using   desired.Forge
	next    reconcile.LaunchGate
}

var _ reconcile.LaunchGate = (*forgeGate)(nil)

func newForgeGate(forges *forgeFlags, using *forgeSetup, next reconcile.LaunchGate) (*forgeGate, error) {
	allowed, err := forges.allowed()
	if err != nil {
		return nil, err
	}
	g := &forgeGate{using: using.selected(), next: next}
	for _, of := range allowed {
		g.allowed = append(g.allowed, of.Forge)
	}
	return g, nil
}

// Check refuses rev when its config selects a forge this reconciler does
// not use: a forge section changed after the start, or one that selects
// a forge the operator does not allow.
func (g *forgeGate) Check(ctx context.Context, rev *desired.Revision) error {
	if g.next != nil {
		if err := g.next.Check(ctx, rev); err != nil {
			return err
		}
	}
	sel, err := desired.SelectForge(rev.Config, g.allowed)
	if err != nil {
		return err
	}
	if sel != g.using {
		msg := fmt.Sprintf("selects forge %s, but this reconciler started with forge %s: restart it to change forges", sel, g.using)
		if rev.Config == nil {
			return fmt.Errorf("the repository has no config: it %s", msg)
		}
		return rev.Config.FieldError("forge", msg)
	}
	return nil
}
