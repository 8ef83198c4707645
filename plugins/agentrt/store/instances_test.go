package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestListInstances(t *testing.T) {
	eachBackend(t, testListInstances)
}

// Instances are listed in spawn order, ties in one millisecond by id,
// each page picking up after the previous one's last instance; every
// instance appears once, and Next is empty only on the last page.
func testListInstances(t *testing.T, bc backendCase) {
	ctx := context.Background()
	c := newClock()
	s, another := bc.open(t, c)
	empty, err := s.ListInstances(ctx, "", 10)
	if err != nil || len(empty.Instances) != 0 || empty.Next != "" || empty.Total != 0 {
		t.Fatalf("empty store = %+v, %v", empty, err)
	}
	var want []string
	for i, key := range []string{"a", "b", "c", "d", "e"} {
		// b and c in the same millisecond: their ids decide.
		if i != 2 {
			c.advance(time.Millisecond)
		}
		want = append(want, spawn(t, s, key).ID)
	}
	if strings.Compare(want[1], want[2]) > 0 {
		want[1], want[2] = want[2], want[1]
	}
	for _, limit := range []int{1, 2, 4, 5, 6} {
		var got []string
		after, pages := "", 0
		for {
			page, err := s.ListInstances(ctx, after, limit)
			if err != nil {
				t.Fatalf("limit %d after %q: %v", limit, after, err)
			}
			pages++
			if pages > len(want)+1 {
				t.Fatalf("limit %d: still paging after %d pages, at %v", limit, pages, got)
			}
			if len(page.Instances) > limit || page.Total != len(want) {
				t.Fatalf("limit %d: page of %d of %d instances", limit, len(page.Instances), page.Total)
			}
			for _, st := range page.Instances {
				got = append(got, st.ID)
			}
			if page.Next == "" {
				break
			}
			if page.Next != page.Instances[len(page.Instances)-1].ID {
				t.Fatalf("limit %d: next %q is not the page's last instance", limit, page.Next)
			}
			after = page.Next
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: listed %v, want %v", limit, got, want)
		}
		// A page as large as what is left is the last: no empty page
		// follows it.
		if wantPages := (len(want) + limit - 1) / limit; pages != wantPages {
			t.Errorf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}
	// Another handle (another process, or another host on PostgreSQL)
	// lists the same.
	page, err := another().ListInstances(ctx, want[1], 2)
	if err != nil || len(page.Instances) != 2 || page.Instances[0].ID != want[2] || page.Next != want[3] {
		t.Errorf("page after %s through another handle = %+v, %v; want %v", want[1], page, err, want[2:4])
	}
	first := page.Instances[0]
	if first.ManifestID != "m" || first.ManifestDigest != "sha256:d" || !first.SpawnedAt.Equal(c.t.Add(-2*time.Millisecond)) {
		t.Errorf("listed instance = %+v", first)
	}
}

func TestListInstancesRefused(t *testing.T) {
	eachBackend(t, testListInstancesRefused)
}

// An after that names no instance, also one an id's prefix or extension,
// is ErrNotFound; a limit below 1 is an error.
func testListInstancesRefused(t *testing.T, bc backendCase) {
	ctx := context.Background()
	s, _ := bc.open(t, newClock())
	id := spawn(t, s, "a").ID
	for _, after := range []string{"agt_nope", id[:len(id)-1], id + "x"} {
		if page, err := s.ListInstances(ctx, after, 10); !errors.Is(err, ErrNotFound) {
			t.Errorf("after %q = %+v, %v; want ErrNotFound", after, page, err)
		}
	}
	if page, err := s.ListInstances(ctx, id, 10); err != nil || len(page.Instances) != 0 || page.Next != "" || page.Total != 1 {
		t.Errorf("after the last instance = %+v, %v; want an empty last page", page, err)
	}
	for _, limit := range []int{0, -1} {
		if _, err := s.ListInstances(ctx, "", limit); err == nil {
			t.Errorf("limit %d accepted", limit)
		}
	}
}

func TestListInstancesWork(t *testing.T) {
	eachBackend(t, testListInstancesWork)
}

// Each instance counts its own queued messages (claimed ones too, not
// delivered ones) and its own working tasks (not finished ones).
func testListInstancesWork(t *testing.T, bc backendCase) {
	ctx := context.Background()
	c := newClock()
	s, _ := bc.open(t, c)
	a := spawn(t, s, "a").ID
	c.advance(time.Millisecond)
	b := spawn(t, s, "b").ID
	c.advance(time.Millisecond)
	idle := spawn(t, s, "idle").ID
	for _, key := range []string{"1", "2", "3"} {
		if _, _, err := send(s, a, "x", key, key, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := send(s, b, "x", "1", "1", 0); err != nil {
		t.Fatal(err)
	}
	// Of a's three messages one is delivered and one claimed.
	claimed, err := s.Claim(ctx, a, 2, time.Minute)
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	if err := s.Ack(ctx, []string{claimed[0].ID}); err != nil {
		t.Fatal(err)
	}
	for id, task := range map[string]struct{ instance, status string }{
		"tsk_1": {b, TaskWorking}, "tsk_2": {b, TaskWorking}, "tsk_3": {a, TaskWorking}, "tsk_4": {idle, TaskEscalated},
	} {
		if err := s.StartTask(ctx, id, KindDelegation, task.instance, task.status, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FinishTask(ctx, "tsk_3", TaskCompleted, []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListInstances(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int{a: {2, 0}, b: {1, 2}, idle: {0, 0}}
	if len(page.Instances) != len(want) {
		t.Fatalf("listed %+v, want %d instances", page.Instances, len(want))
	}
	for _, st := range page.Instances {
		if got := [2]int{st.Queued, st.Working}; got != want[st.ID] {
			t.Errorf("%s: queued, working = %v, want %v", st.ID, got, want[st.ID])
		}
	}
}
