package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// gatedTasks is a task store whose first read of each task finds it
// pending, and whose later reads wait for gate and find it completed,
// counting the reads in flight.
type gatedTasks struct {
	arbiter.TaskService
	gate chan struct{}

	mu          sync.Mutex
	read        map[string]bool
	inFlight    int
	maxInFlight int
}

func (g *gatedTasks) FindTaskByID(ctx context.Context, accountID, id string) (*arbiter.Task, error) {
	g.mu.Lock()
	if !g.read[id] {
		g.read[id] = true
		g.mu.Unlock()
		return &arbiter.Task{ID: id, AccountID: accountID, Status: arbiter.StatusPending}, nil
	}
	g.inFlight++
	g.maxInFlight = max(g.maxInFlight, g.inFlight)
	g.mu.Unlock()
	<-g.gate
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
	return &arbiter.Task{ID: id, AccountID: accountID, Status: arbiter.StatusCompleted}, nil
}

// GoldVerdicts finds no gold task: the store's tasks are none.
func (g *gatedTasks) GoldVerdicts(context.Context, string, []string) (map[string]string, error) {
	return nil, nil
}

func (g *gatedTasks) counts() (inFlight, maxInFlight int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.maxInFlight
}

// wokenWatcher wakes every watch at once, as a batch of decisions does.
type wokenWatcher struct{}

func (wokenWatcher) WatchTask(string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	c <- struct{}{}
	return c, func() {}
}

// TestTaskGet_WaitsWokenTogetherAnswerAFewAtATime: when many waits end at
// once, at most the answering slots read and answer at once; the others
// wait for a slot, and every one is answered with its completed task.
func TestTaskGet_WaitsWokenTogetherAnswerAFewAtATime(t *testing.T) {
	const slots, waiters = 2, 6
	tasks := &gatedTasks{gate: make(chan struct{}), read: map[string]bool{}}
	answering := newAnswerSlots(slots)
	h := taskGet(tasks, wokenWatcher{}, nil, answering, nil, nil)
	codes := make(chan int, waiters)
	for i := range waiters {
		go func() {
			r := httptest.NewRequest(http.MethodGet, "/v1/tasks/tsk_x?wait=60", nil)
			r = r.WithContext(arbiter.NewContextWithAccountID(r.Context(), "acc_a"))
			r.SetPathValue("id", "tsk_"+string(rune('a'+i)))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes <- w.Code
		}()
	}
	// Every waiter is woken: the slots' worth read, the rest wait.
	for deadline := time.Now().Add(30 * time.Second); ; {
		inFlight, _ := tasks.counts()
		if inFlight+int(answering.waiting.Load()) == waiters {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reads in flight and %d waiting for a slot, want %d in all", inFlight, answering.waiting.Load(), waiters)
		}
		time.Sleep(time.Millisecond)
	}
	if _, most := tasks.counts(); most > slots {
		t.Errorf("%d woken waits read at once, want at most %d", most, slots)
	}
	close(tasks.gate)
	for range waiters {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a waiter answered %d, want 200", code)
		}
	}
	if _, most := tasks.counts(); most > slots {
		t.Errorf("%d woken waits read at once, want at most %d", most, slots)
	}
}

// TestAnswerSlots_TakeEndsWithItsContext: a request whose caller leaves
// while it waits for a slot takes none.
func TestAnswerSlots_TakeEndsWithItsContext(t *testing.T) {
	a := newAnswerSlots(1)
	if !a.take(context.Background()) {
		t.Fatal("the first take found no free slot")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if a.take(ctx) {
		t.Fatal("a take with its context ended took the slot held")
	}
	a.give()
	if !a.take(context.Background()) {
		t.Fatal("the slot given back cannot be taken")
	}
	if held := len(a.slots); held != 1 {
		t.Fatalf("%d slots held, want 1", held)
	}
}
