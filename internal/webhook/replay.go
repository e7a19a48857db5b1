package webhook

import (
	"sync"
	"time"
)

// deliveries remembers the delivery ids that gave a hint: at most max of
// them, each for at most window, the oldest forgotten first.
type deliveries struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	now    func() time.Time

	ids  map[string]bool
	ring []seen // the remembered ids, oldest at head; grows up to max
	head int
	n    int
}

type seen struct {
	id string
	at time.Time
}

func newDeliveries(entries int, window time.Duration, now func() time.Time) *deliveries {
	return &deliveries{max: entries, window: window, now: now, ids: make(map[string]bool)}
}

// has reports whether any of keys is remembered.
func (d *deliveries) has(keys ...string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(d.now())
	for _, k := range keys {
		if d.ids[k] {
			return true
		}
	}
	return false
}

// add remembers keys and reports whether none of them was remembered
// before; if one was, it remembers nothing.
func (d *deliveries) add(keys ...string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	d.expire(now)
	for _, k := range keys {
		if d.ids[k] {
			return false
		}
	}
	for _, k := range keys {
		d.remember(k, now)
	}
	return true
}

func (d *deliveries) remember(id string, now time.Time) {
	if d.n == len(d.ring) {
		if len(d.ring) == d.max {
			d.drop()
		} else {
			d.grow()
		}
	}
	d.ring[(d.head+d.n)%len(d.ring)] = seen{id: id, at: now}
	d.n++
	d.ids[id] = true
}

// expire forgets the ids older than the window. The ring is in the order
// ids were added, so they are all at its head.
func (d *deliveries) expire(now time.Time) {
	for d.n > 0 && now.Sub(d.ring[d.head].at) >= d.window {
		d.drop()
	}
}

// drop forgets the oldest id.
func (d *deliveries) drop() {
	delete(d.ids, d.ring[d.head].id)
	d.ring[d.head] = seen{}
	d.head = (d.head + 1) % len(d.ring)
	d.n--
}

// grow makes room for more ids, up to max, so an idle receiver holds
// little memory.
func (d *deliveries) grow() {
	ring := make([]seen, min(max(2*len(d.ring), 64), d.max))
	for i := range d.n {
		ring[i] = d.ring[(d.head+i)%len(d.ring)]
	}
	d.ring, d.head = ring, 0
}
