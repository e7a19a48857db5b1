package spec

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// Cache remembers the evaluations of definition files by their name and
// content, so that a loader reading one revision after another (the
// reconciler, a plan of a pull request's head after its base) evaluates
// only the files that changed. Only evaluations without errors are
// remembered: an error may come from a limit (a timeout, the revision's
// budget) rather than from the file. A Cache is safe for concurrent use
// and may be shared by loaders with different evaluators: the schema
// decides the output, not the evaluator.
type Cache struct {
	mu      sync.Mutex
	max     int
	entries map[cacheKey]*list.Element
	order   *list.List // of *cacheEntry, most recently used first
}

type cacheKey [sha256.Size]byte

type cacheEntry struct {
	key cacheKey
	out Output
	// def is the definition decoded from out, once a load decoded it:
	// decoding (a strict JSON decode, normalising, the digest) costs
	// more than the rest of a load whose files are all remembered.
	def *Definition
}

// NewCache returns a Cache of at most max evaluations (max <= 0 means
// DefaultLimits.MaxFiles, a whole repository's worth), the least
// recently used forgotten first.
func NewCache(max int) *Cache {
	if max <= 0 {
		max = DefaultLimits.MaxFiles
	}
	return &Cache{max: max, entries: map[cacheKey]*list.Element{}, order: list.New()}
}

func keyOf(in Input) cacheKey {
	h := sha256.New()
	kind := byte('d')
	switch {
	case in.Config:
		kind = 'c'
	case in.Approval:
		kind = 'a'
	}
	h.Write([]byte{kind})
	h.Write([]byte(in.Name))
	h.Write([]byte{0})
	h.Write(in.Data)
	var k cacheKey
	h.Sum(k[:0])
	return k
}

// get returns the remembered evaluation of in.
func (c *Cache) get(k cacheKey) (Output, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return Output{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).out, true
}

// definition returns the definition decoded from k's evaluation, once
// keepDefinition remembered it.
func (c *Cache) definition(k cacheKey) (Definition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || e.Value.(*cacheEntry).def == nil {
		return Definition{}, false
	}
	return *e.Value.(*cacheEntry).def, true
}

// keepDefinition remembers d, decoded without an error from k's
// evaluation, while the evaluation is remembered. The definitions a
// cache hands out share their Task or Campaign: nothing changes a
// loaded definition in place (Resolve returns a copy).
func (c *Cache) keepDefinition(k cacheKey, d Definition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		e.Value.(*cacheEntry).def = &d
	}
}

// put remembers out, if it has no errors, as the evaluation of k.
func (c *Cache) put(k cacheKey, out Output) {
	if len(out.Errors) > 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{key: k, out: out})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}
