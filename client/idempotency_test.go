package client_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/db"
)

func TestClient_CreateTask_IdempotencyKey(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		in := refund
		in.IdempotencyKey = "refund-ord_1"
		first, err := c.CreateTask(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.CreateTask(ctx, in)
		if err != nil || again.ID != first.ID {
			t.Fatalf("the same create again = %+v, %v; want task %s", again, err, first.ID)
		}
		other := in
		other.Prompt = "Refund the whole order?"
		_, err = c.CreateTask(ctx, other)
		wantError(t, err, http.StatusUnprocessableEntity, client.IsUnprocessable)

		in.IdempotencyKey = "bad\tkey"
		_, err = c.CreateTask(ctx, in)
		wantError(t, err, http.StatusBadRequest, client.IsInvalid)
		if used, _, err := s.store.UsageToday(ctx, s.accountID); err != nil || used != 1 {
			t.Fatalf("usage = %d (%v), want the one task", used, err)
		}
	})
}

// hangUp closes the connection of the request without an answer, as a
// network failure would.
func hangUp(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	conn.Close()
}

func TestClient_RetriesCreatesThatAreSafeToRepeat(t *testing.T) {
	keyed := refund
	keyed.IdempotencyKey = "k1"
	for _, tc := range []struct {
		name  string
		in    client.TaskCreate
		first func(t *testing.T, w http.ResponseWriter)
		calls int32
	}{
		{"LostConnection", keyed, hangUp, 2},
		{"ServerError", keyed, func(t *testing.T, w http.ResponseWriter) {
			answerJSON(w, http.StatusServiceUnavailable, `{"error":"The store is not answering."}`)
		}, 2},
		{"InFlight", keyed, func(t *testing.T, w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			answerJSON(w, http.StatusConflict, `{"error":"Still being stored."}`)
		}, 2},
		{"LostConnectionWithoutKey", refund, hangUp, 1},
		{"ServerErrorWithoutKey", refund, func(t *testing.T, w http.ResponseWriter) {
			answerJSON(w, http.StatusServiceUnavailable, `{"error":"The store is not answering."}`)
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys, bodies []string
			url, calls := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				keys, bodies = append(keys, r.Header.Get("Idempotency-Key")), append(bodies, string(b))
				mu.Unlock()
				if n == 1 {
					tc.first(t, w)
					return
				}
				answerJSON(w, http.StatusOK, taskJSON)
			})
			task, err := fakeClient(url).CreateTask(ctx, tc.in)
			if calls.Load() != tc.calls {
				t.Fatalf("sent %d times, want %d", calls.Load(), tc.calls)
			}
			if tc.calls == 1 {
				if err == nil {
					t.Fatal("a create without a key was retried or succeeded")
				}
				return
			}
			if err != nil || task.ID != "tsk_0123456789abcdef" {
				t.Fatalf("CreateTask = %+v, %v", task, err)
			}
			if keys[0] != "k1" || keys[1] != "k1" || bodies[0] != bodies[1] || strings.Contains(bodies[0], "k1") {
				t.Fatalf("keys %q, bodies %q: want the same key in the header of both, the same body without it", keys, bodies)
			}
		})
	}
}

func TestClient_CreateTasks(t *testing.T) {
	eachServer(t, db.Options{DailyTaskCap: 2}, func(t *testing.T, s *server) {
		c := s.client()
		k1 := refund
		k1.IdempotencyKey = "k1"
		k1Other := k1
		k1Other.Prompt = "Another question?"
		k2, k3 := k1, k1
		k2.IdempotencyKey, k3.IdempotencyKey = "k2", "k3"
		invalid := client.TaskCreate{Prompt: "", AllowedVerdicts: []string{"a"}}

		results, err := c.CreateTasks(ctx, []client.TaskCreate{k1, invalid, k1, k1Other, k2, k3})
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 6 {
			t.Fatalf("%d results for 6 tasks", len(results))
		}
		if results[0].Err != nil || results[0].Replayed || results[0].Task.Prompt != "Refund?" {
			t.Errorf("task 0 = %+v", results[0])
		}
		if !client.IsInvalid(results[1].Err) || results[1].Task != nil {
			t.Errorf("task 1 = %+v, want 400", results[1])
		}
		if results[2].Err != nil || !results[2].Replayed || results[2].Task.ID != results[0].Task.ID {
			t.Errorf("task 2 = %+v, want a replay of task 0", results[2])
		}
		if !client.IsUnprocessable(results[3].Err) {
			t.Errorf("task 3 = %+v, want 422", results[3])
		}
		if results[4].Err != nil || results[4].Replayed {
			t.Errorf("task 4 = %+v, want a new task", results[4])
		}
		if !client.IsRateLimited(results[5].Err) || results[5].Err.Error() == "" {
			t.Errorf("task 5 = %+v, want 429 past the cap of 2", results[5])
		}

		// The whole batch again: the keyed tasks replay, k3 is still over
		// the cap.
		again, err := c.CreateTasks(ctx, []client.TaskCreate{k1, k2, k3})
		if err != nil {
			t.Fatal(err)
		}
		if !again[0].Replayed || again[0].Task.ID != results[0].Task.ID || !again[1].Replayed ||
			again[1].Task.ID != results[4].Task.ID || !client.IsRateLimited(again[2].Err) {
			t.Fatalf("the batch again = %+v", again)
		}

		_, err = c.CreateTasks(ctx, make([]client.TaskCreate, client.MaxBatchTasks+1))
		wantError(t, err, http.StatusBadRequest, client.IsInvalid)
		_, err = c.CreateTasks(ctx, nil)
		wantError(t, err, http.StatusBadRequest, client.IsInvalid)
	})
}

func TestClient_CreateTasks_RetriedWhenEveryTaskHasAKey(t *testing.T) {
	k1, k2 := refund, refund
	k1.IdempotencyKey, k2.IdempotencyKey = "k1", "k2"
	for _, tc := range []struct {
		name  string
		tasks []client.TaskCreate
		calls int32
	}{
		{"EveryTaskKeyed", []client.TaskCreate{k1, k2}, 2},
		{"OneWithoutKey", []client.TaskCreate{k1, refund}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var second map[string][]map[string]any
			url, calls := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					hangUp(t, w)
					return
				}
				if err := json.NewDecoder(r.Body).Decode(&second); err != nil {
					t.Error(err)
				}
				answerJSON(w, http.StatusOK, `{"results":[{"status":200,"task":`+taskJSON+`,"replayed":true},
					{"status":429,"error":"The daily cap is used up."}]}`)
			})
			results, err := fakeClient(url).CreateTasks(ctx, tc.tasks)
			if calls.Load() != tc.calls {
				t.Fatalf("sent %d times, want %d", calls.Load(), tc.calls)
			}
			if tc.calls == 1 {
				if err == nil {
					t.Fatal("a batch with a task without a key succeeded after a lost connection")
				}
				return
			}
			if err != nil || !results[0].Replayed || results[0].Task.ID != "tsk_0123456789abcdef" || !client.IsRateLimited(results[1].Err) {
				t.Fatalf("CreateTasks = %+v, %v", results, err)
			}
			if keys := []any{second["tasks"][0]["idempotency_key"], second["tasks"][1]["idempotency_key"]}; keys[0] != "k1" || keys[1] != "k2" {
				t.Fatalf("the tasks carried keys %v, want k1 and k2 in the body", keys)
			}
		})
	}
}
