package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder is a Run that answers each call with its input doubled and
// remembers the sizes of the groups it was given.
type recorder struct {
	mu    sync.Mutex
	sizes []int
}

func (r *recorder) run(_ context.Context, calls []*Call[int, int]) {
	r.mu.Lock()
	r.sizes = append(r.sizes, len(calls))
	r.mu.Unlock()
	for _, c := range calls {
		c.Out = 2 * c.In
	}
}

func (r *recorder) groups() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sizes)
}

// waitFor waits until cond holds, at most 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting: %s", what)
		}
	}
}

// queue starts n callers of g (inputs 0..n-1) and returns their outcomes
// once all have their answer.
func queue(t *testing.T, g *Grouper[int, int], n int) (wait func() (outs []int, errs []error)) {
	t.Helper()
	outs, errs := make([]int, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = g.Do(context.Background(), i)
		}()
	}
	return func() ([]int, []error) {
		wg.Wait()
		return outs, errs
	}
}

func TestALoneCallRunsAtOnceAsAGroupOfOne(t *testing.T) {
	t.Parallel()
	var r recorder
	g := &Grouper[int, int]{Run: r.run, Timeout: time.Minute}
	out, err := g.Do(context.Background(), 21)
	if err != nil || out != 42 {
		t.Fatalf("Do = %d, %v; want 42, nil", out, err)
	}
	if got := r.groups(); !slices.Equal(got, []int{1}) {
		t.Fatalf("groups = %v, want [1]", got)
	}
}

func TestCallsQueuedTogetherShareAGroup(t *testing.T) {
	t.Parallel()
	var r recorder
	g := &Grouper[int, int]{Run: r.run, Timeout: time.Minute}
	release := g.Hold()
	wait := queue(t, g, 10)
	waitFor(t, "ten calls queued", func() bool { return g.Queued() == 10 })
	if got := r.groups(); len(got) != 0 {
		t.Fatalf("groups ran while held: %v", got)
	}
	release()
	outs, errs := wait()
	for i := range outs {
		if errs[i] != nil || outs[i] != 2*i {
			t.Errorf("call %d = %d, %v; want %d, nil", i, outs[i], errs[i], 2*i)
		}
	}
	if got := r.groups(); !slices.Equal(got, []int{10}) {
		t.Fatalf("groups = %v, want one of 10", got)
	}
	g.AddGrouped(10)
	if g.Grouped() != 10 || g.Queued() != 0 {
		t.Fatalf("grouped %d, queued %d; want 10, 0", g.Grouped(), g.Queued())
	}
}

func TestMaxBoundsAGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		max, calls int
		want       []int
	}{
		{max: 3, calls: 7, want: []int{3, 3, 1}},
		{max: 0, calls: MaxGroup + 1, want: []int{MaxGroup, 1}}, // the default
	} {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			t.Parallel()
			var r recorder
			g := &Grouper[int, int]{Run: r.run, Max: tc.max, Timeout: time.Minute}
			release := g.Hold()
			wait := queue(t, g, tc.calls)
			waitFor(t, "every call queued", func() bool { return g.Queued() == tc.calls })
			release()
			wait()
			if got := r.groups(); !slices.Equal(got, tc.want) {
				t.Fatalf("groups = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEachCallerGetsItsOwnError(t *testing.T) {
	t.Parallel()
	odd := errors.New("odd")
	g := &Grouper[int, int]{Timeout: time.Minute, Run: func(_ context.Context, calls []*Call[int, int]) {
		for _, c := range calls {
			if c.In%2 == 1 {
				c.Err = fmt.Errorf("call %d: %w", c.In, odd)
			} else {
				c.Out = c.In
			}
		}
	}}
	release := g.Hold()
	wait := queue(t, g, 6)
	waitFor(t, "six calls queued", func() bool { return g.Queued() == 6 })
	release()
	outs, errs := wait()
	for i := range outs {
		switch {
		case i%2 == 1 && (!errors.Is(errs[i], odd) || errs[i].Error() != fmt.Sprintf("call %d: odd", i)):
			t.Errorf("call %d: error %v, want its own", i, errs[i])
		case i%2 == 0 && (errs[i] != nil || outs[i] != i):
			t.Errorf("call %d = %d, %v; want %d, nil", i, outs[i], errs[i], i)
		}
	}
}

func TestAtMostInFlightGroupsRunAtOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	running, most := 0, 0
	unblock := make(chan struct{})
	g := &Grouper[int, int]{Max: 1, Timeout: time.Minute, Run: func(_ context.Context, calls []*Call[int, int]) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		<-unblock
		mu.Lock()
		running--
		mu.Unlock()
	}}
	wait := queue(t, g, 5)
	waitFor(t, "the other calls queued", func() bool { return g.Queued() == 5-InFlight })
	close(unblock)
	wait()
	if most != InFlight {
		t.Fatalf("%d groups ran at once, want %d", most, InFlight)
	}
}

func TestACallerThatGivesUpWhileQueuedWithdraws(t *testing.T) {
	t.Parallel()
	var r recorder
	g := &Grouper[int, int]{Run: r.run, Timeout: time.Minute}
	release := g.Hold()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, 1)
		done <- err
	}()
	waitFor(t, "the call queued", func() bool { return g.Queued() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	if n := g.Queued(); n != 0 {
		t.Fatalf("%d calls still queued, want 0", n)
	}
	release()
	if out, err := g.Do(context.Background(), 2); err != nil || out != 4 {
		t.Fatalf("next Do = %d, %v; want 4, nil", out, err)
	}
	if got := r.groups(); !slices.Equal(got, []int{1}) {
		t.Fatalf("groups = %v, want only the later call's", got)
	}
}

func TestAGroupRunsUntilItsCallersLastDeadline(t *testing.T) {
	t.Parallel()
	now := time.Now()
	soon, later := now.Add(time.Minute), now.Add(2*time.Minute)
	limit := now.Add(time.Hour)
	for _, tc := range []struct {
		name      string
		deadlines []time.Time
		want      time.Time
	}{
		{"the last caller's", []time.Time{soon, later}, later},
		{"the timeout when a caller has none", []time.Time{soon, {}}, limit},
		{"the timeout when it comes first", []time.Time{now.Add(2 * time.Hour)}, limit},
	} {
		calls := make([]*Call[int, int], len(tc.deadlines))
		for i, d := range tc.deadlines {
			calls[i] = &Call[int, int]{deadline: d}
		}
		if got := deadline(calls, limit); !got.Equal(tc.want) {
			t.Errorf("%s: deadline = %v, want %v", tc.name, got, tc.want)
		}
	}

	// Run sees it: a group of callers without deadlines gets the timeout.
	got := make(chan time.Time, 1)
	g := &Grouper[int, int]{Timeout: time.Hour, Run: func(ctx context.Context, _ []*Call[int, int]) {
		d, _ := ctx.Deadline()
		got <- d
	}}
	before := time.Now()
	g.Do(context.Background(), 0)
	if d := <-got; d.Before(before.Add(time.Hour)) || d.After(time.Now().Add(time.Hour)) {
		t.Fatalf("group deadline %v, want an hour from the call", d)
	}
}

func TestAGroupOutlivesACallerThatGivesUp(t *testing.T) {
	t.Parallel()
	started, finish := make(chan struct{}), make(chan struct{})
	ran := make(chan error, 1)
	g := &Grouper[int, int]{Timeout: time.Minute, Run: func(ctx context.Context, calls []*Call[int, int]) {
		close(started)
		<-finish
		ran <- ctx.Err()
		calls[0].Out = 1
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, 0)
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	close(finish)
	if err := <-ran; err != nil {
		t.Fatalf("the group's context ended with its caller's: %v", err)
	}
}
