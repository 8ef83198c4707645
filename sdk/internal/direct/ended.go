package direct

import (
	"container/heap"
	"time"
)

// endedRuns remembers the runs the host ended until their grants expire by
// themselves (the run's deadline, 10 minutes by default). A plugin that
// serves many runs remembers many: the expiries are kept in a heap as well
// as by run id, so that forgetting the expired ones at each run's end
// costs those alone, not a pass over every run still remembered, and a
// lookup stays a map's. Not safe for concurrent use: the Endpoint's lock
// guards it.
type endedRuns struct {
	expiry map[string]time.Time
	queue  expiryQueue
}

func newEndedRuns() *endedRuns {
	return &endedRuns{expiry: map[string]time.Time{}}
}

// has reports whether the run is remembered as ended.
func (r *endedRuns) has(runID string) bool {
	_, ok := r.expiry[runID]
	return ok
}

// add remembers runID until at; a run ended again keeps the later of its
// two expiries.
func (r *endedRuns) add(runID string, at time.Time) {
	if old, ok := r.expiry[runID]; ok && !at.After(old) {
		return
	}
	r.expiry[runID] = at
	heap.Push(&r.queue, expiring{runID: runID, at: at})
}

// forget drops the runs whose expiry is before now.
func (r *endedRuns) forget(now time.Time) {
	for len(r.queue) > 0 && now.After(r.queue[0].at) {
		e := heap.Pop(&r.queue).(expiring)
		// A run ended again has a later entry of its own; this one is
		// stale unless it is the run's current expiry.
		if r.expiry[e.runID].Equal(e.at) {
			delete(r.expiry, e.runID)
		}
	}
}

// len is how many runs are remembered.
func (r *endedRuns) len() int { return len(r.expiry) }

// expiring is one entry of the queue.
type expiring struct {
	runID string
	at    time.Time
}

// expiryQueue is a min-heap of expiries (container/heap).
type expiryQueue []expiring

func (q expiryQueue) Len() int           { return len(q) }
func (q expiryQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q expiryQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *expiryQueue) Push(x any)        { *q = append(*q, x.(expiring)) }
func (q *expiryQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}
