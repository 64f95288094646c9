package worker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestRecorder_WritesTheAttemptsWaitingInOneGroup: attempts handed over
// while a group is written wait, and the next write takes them all, each
// attempt getting its own outcome; a write that fails fails each attempt
// of its group.
func TestRecorder_WritesTheAttemptsWaitingInOneGroup(t *testing.T) {
	var mu sync.Mutex
	var groups [][]int
	writing, release := make(chan struct{}), make(chan struct{})
	lost, down := errors.New("lease lost"), errors.New("database down")
	r := newRecorder(8, func(_ context.Context, records []int) ([]error, error) {
		mu.Lock()
		groups = append(groups, slices.Clone(records))
		mu.Unlock()
		if records[0] == 0 {
			close(writing)
			<-release
		}
		if records[0] == 9 {
			return nil, down
		}
		out := make([]error, len(records))
		for i, rec := range records {
			if rec == 3 {
				out[i] = lost
			}
		}
		return out, nil
	}, func(err error) error { return err })
	go r.run(t.Context())

	outcomes := make([]error, 5)
	var wg sync.WaitGroup
	wg.Go(func() { outcomes[0] = r.record(0) })
	<-writing
	for i := 1; i < 5; i++ {
		wg.Go(func() { outcomes[i] = r.record(i) })
	}
	for len(r.queue) != 4 {
		select {
		case <-t.Context().Done():
			t.Fatalf("%d attempts wait, want 4", len(r.queue))
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
	wg.Wait()
	if err := r.record(9); err != down {
		t.Errorf("an attempt of a failed write: %v, want %v", err, down)
	}
	r.close()
	if len(groups) != 3 || !slices.Equal(groups[0], []int{0}) || !slices.Equal(groups[2], []int{9}) {
		t.Fatalf("groups %v, want [0], then 1 to 4 together, then [9]", groups)
	}
	slices.Sort(groups[1])
	if !slices.Equal(groups[1], []int{1, 2, 3, 4}) {
		t.Errorf("the second group %v, want the four that waited", groups[1])
	}
	for i, err := range outcomes {
		if want := map[bool]error{true: lost}[i == 3]; err != want {
			t.Errorf("attempt %d: %v, want %v", i, err, want)
		}
	}
}
