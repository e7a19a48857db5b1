package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/fleetlift/fleetlift/internal/state"
)

var _ state.Store = (*Store)(nil)

// Store keeps recorded state in a map. The zero value is not ready; use
// New. It is safe for concurrent use.
type Store struct {
	mu        sync.RWMutex
	campaigns map[string]state.Campaign
}

// New returns an empty store.
func New() *Store {
	return &Store{campaigns: map[string]state.Campaign{}}
}

// Get returns the state recorded for id.
func (s *Store) Get(ctx context.Context, id string) (state.Campaign, error) {
	if err := ctx.Err(); err != nil {
		return state.Campaign{}, fmt.Errorf("get %s: %w", id, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.campaigns[id]
	if !ok {
		return state.Campaign{}, fmt.Errorf("get %s: %w", id, state.ErrNotFound)
	}
	return c.Clone(), nil
}

// List returns every recorded campaign, sorted by ID.
func (s *Store) List(ctx context.Context) ([]state.Campaign, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]state.Campaign, 0, len(s.campaigns))
	for _, c := range s.campaigns {
		out = append(out, c.Clone())
	}
	slices.SortFunc(out, func(a, b state.Campaign) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Put records c.
func (s *Store) Put(ctx context.Context, c state.Campaign) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", c.ID, err)
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.campaigns[c.ID] = c.Clone()
	return nil
}

// Delete forgets id.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.campaigns, id)
	return nil
}
