package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
)

// doKeyed sends a request with the Idempotency-Key headers given (none
// when keys is empty) and returns the status, headers and body, validated
// against the OpenAPI document.
func (a *api) doKeyed(method, path, key, body string, idempotencyKeys ...string) (int, http.Header, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for _, k := range idempotencyKeys {
		req.Header.Add("Idempotency-Key", k)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	openapitest.ValidateResponse(a.t, req, res.StatusCode, res.Header, b)
	return res.StatusCode, res.Header, b
}

// createKeyed creates goodTask-like body with an Idempotency-Key and wants
// 200; it returns the task and whether the answer was a replay.
func createKeyed(t *testing.T, a *api, key, body, idempotencyKey string) (map[string]any, bool) {
	t.Helper()
	status, h, b := a.doKeyed("POST", "/v1/tasks", key, body, idempotencyKey)
	if status != http.StatusOK {
		t.Fatalf("create with key %q: %d %s", idempotencyKey, status, b)
	}
	var task map[string]any
	if err := json.Unmarshal(b, &task); err != nil {
		t.Fatal(err)
	}
	switch h.Get("Idempotent-Replayed") {
	case "true":
		return task, true
	case "":
		return task, false
	}
	t.Fatalf("Idempotent-Replayed = %q", h.Get("Idempotent-Replayed"))
	return nil, false
}

// usage returns the account's tasks counted today.
func (a *api) usage(email string) int {
	a.t.Helper()
	account, err := a.store.FindAccountByEmail(ctx, email)
	if err != nil {
		a.t.Fatal(err)
	}
	used, _, err := a.store.UsageToday(ctx, account.ID)
	if err != nil {
		a.t.Fatal(err)
	}
	return used
}

func TestTaskCreate_IdempotencyKey(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		first, replayed := createKeyed(t, a, key, goodTask, "order-1/refund")
		if replayed {
			t.Fatal("the first create is marked as a replay")
		}

		t.Run("ReplayReturnsTheSameTask", func(t *testing.T) {
			// The same parsed request: other whitespace, field order and
			// context member order, and a default spelled out.
			same := `{ "context": {"amount": 12}, "allowed_verdicts": ["approve", "reject"],
				"task_type": "decide", "prompt": "Approve this refund?" }`
			again, replayed := createKeyed(t, a, key, same, "order-1/refund")
			if !replayed || again["id"] != first["id"] || fmt.Sprint(again) != fmt.Sprint(first) {
				t.Fatalf("replay = %v (replayed %v), want %v", again, replayed, first)
			}
			// Another key of the same account shares its keys.
			if again, replayed := createKeyed(t, a, a.newKey("a@example.com"), goodTask, "order-1/refund"); !replayed || again["id"] != first["id"] {
				t.Fatalf("replay with another key of the account = %v", again)
			}
		})
		t.Run("DifferentRequestIs422", func(t *testing.T) {
			other := `{"prompt":"Approve this refund?","allowed_verdicts":["approve","reject"],"context":{"amount":13}}`
			status, h, b := a.doKeyed("POST", "/v1/tasks", key, other, "order-1/refund")
			if msg := wantError(t, status, h, b, http.StatusUnprocessableEntity); !strings.Contains(msg, "different request") {
				t.Errorf("422 says %q", msg)
			}
		})
		t.Run("AnotherAccountHasItsOwnKeys", func(t *testing.T) {
			theirs, replayed := createKeyed(t, a, a.newKey("b@example.com"), goodTask, "order-1/refund")
			if replayed || theirs["id"] == first["id"] {
				t.Fatalf("another account's create = %v (replayed %v), want its own task", theirs, replayed)
			}
		})
		t.Run("RefusedRequestsLeaveTheKeyFree", func(t *testing.T) {
			big := `{"prompt":"` + strings.Repeat("a", arbiter.MaxBodyBytes) + `","allowed_verdicts":["a"]}`
			for _, tc := range []struct {
				body   string
				status int
			}{
				{`{"prompt":"","allowed_verdicts":["approve"]}`, 400},
				{`{"prompt":"Approve?","allowed_verdicts":["approve"],"PROMPT":"x"}`, 400},
				{big, 413},
			} {
				status, h, b := a.doKeyed("POST", "/v1/tasks", key, tc.body, "fix-and-retry")
				wantError(t, status, h, b, tc.status)
			}
			// Fixed, the same key makes a new task, of another request
			// than the refused ones.
			if _, replayed := createKeyed(t, a, key, goodTask, "fix-and-retry"); replayed {
				t.Fatal("a key of refused requests replayed")
			}
		})
		t.Run("BadKeysAre400", func(t *testing.T) {
			for name, keys := range map[string][]string{
				"Empty":    {""},
				"TooLong":  {strings.Repeat("k", 256)},
				"NonASCII": {"clé"},
				"Control":  {"a\tb"},
				"Two":      {"k1", "k2"},
			} {
				status, h, b := a.doKeyed("POST", "/v1/tasks", key, goodTask, keys...)
				if msg := wantError(t, status, h, b, 400); !strings.Contains(msg, "dempotency") {
					t.Errorf("%s: %q does not mention the idempotency key", name, msg)
				}
			}
			if _, replayed := createKeyed(t, a, key, goodTask, strings.Repeat("~", 255)); replayed {
				t.Fatal("a new 255-character key replayed")
			}
		})
		// Three new tasks in the account: the first, the fixed one, the
		// 255-character key's; nothing else was stored.
		if used := a.usage("a@example.com"); used != 3 {
			t.Fatalf("usage = %d, want 3", used)
		}
	})
}

func TestTaskCreate_IdempotencyKey_ReplaysDoNotSpendTheCap(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{DailyTaskCap: 1}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		first, _ := createKeyed(t, a, key, goodTask, "k1")
		for range 3 {
			if again, replayed := createKeyed(t, a, key, goodTask, "k1"); !replayed || again["id"] != first["id"] {
				t.Fatalf("replay at the cap = %v", again)
			}
		}
		status, h, b := a.doKeyed("POST", "/v1/tasks", key, goodTask, "k2")
		wantError(t, status, h, b, http.StatusTooManyRequests)

		// The 429 stored no key: with room again, k2 makes a task.
		account, _ := a.store.FindAccountByEmail(ctx, "a@example.com")
		two := 2
		if err := a.store.SetDailyCap(ctx, account.ID, &two); err != nil {
			t.Fatal(err)
		}
		if _, replayed := createKeyed(t, a, key, goodTask, "k2"); replayed {
			t.Fatal("k2 replayed after its 429")
		}
		if used := a.usage("a@example.com"); used != 2 {
			t.Fatalf("usage = %d, want 2", used)
		}
	})
}

func TestTaskCreate_IdempotencyKey_ConcurrentCreatesMakeOneTask(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		var mu sync.Mutex
		ids := map[any]int{}
		var fresh, conflicts int
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				req, _ := http.NewRequest("POST", a.srv.URL+"/v1/tasks", strings.NewReader(goodTask))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Idempotency-Key", "one-key")
				res, err := a.srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				openapitest.ValidateResponse(t, req, res.StatusCode, res.Header, b)
				mu.Lock()
				defer mu.Unlock()
				switch res.StatusCode {
				case http.StatusOK:
					var task map[string]any
					if err := json.Unmarshal(b, &task); err != nil {
						t.Error(err)
						return
					}
					ids[task["id"]]++
					if res.Header.Get("Idempotent-Replayed") != "true" {
						fresh++
					}
				case http.StatusConflict:
					if res.Header.Get("Retry-After") != "1" {
						t.Errorf("409 with Retry-After %q, want 1", res.Header.Get("Retry-After"))
					}
					conflicts++
				default:
					t.Errorf("status %d: %s", res.StatusCode, b)
				}
			})
		}
		wg.Wait()
		if len(ids) != 1 || fresh != 1 {
			t.Fatalf("tasks %v, %d not replayed, %d conflicts; want one task, made once", ids, fresh, conflicts)
		}
		if used := a.usage("a@example.com"); used != 1 {
			t.Fatalf("usage = %d, want 1", used)
		}
	})
}

// batchResult is one result of a batch answer.
type batchResult struct {
	Status   int            `json:"status"`
	Task     map[string]any `json:"task"`
	Replayed *bool          `json:"replayed"`
	Error    string         `json:"error"`
}

// createBatch posts a batch and wants 200 with one result per task.
func createBatch(t *testing.T, a *api, key string, tasks ...string) []batchResult {
	t.Helper()
	status, _, b := a.do("POST", "/v1/tasks/batch", key, `{"tasks": [`+strings.Join(tasks, ",")+`]}`)
	if status != http.StatusOK {
		t.Fatalf("batch: %d %s", status, b)
	}
	var answer struct {
		Results []batchResult `json:"results"`
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		t.Fatal(err)
	}
	if len(answer.Results) != len(tasks) {
		t.Fatalf("%d results for %d tasks: %s", len(answer.Results), len(tasks), b)
	}
	return answer.Results
}

// withKey returns goodTask-like JSON for prompt with an idempotency key.
func withKey(prompt, key string) string {
	return fmt.Sprintf(`{"prompt":%q,"allowed_verdicts":["approve","reject"],"idempotency_key":%q}`, prompt, key)
}

func TestTaskBatchCreate(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		single, _ := createKeyed(t, a, key, `{"prompt":"Single","allowed_verdicts":["approve","reject"]}`, "s1")

		results := createBatch(t, a, key,
			goodTask,                                 // 0: new
			`{"prompt":"","allowed_verdicts":["a"]}`, // 1: invalid
			withKey("Keyed", "b1"),                   // 2: new, keyed
			`5`,                                      // 3: not an object
			withKey("Single", "s1"),                  // 4: replays the single create's key
			withKey("Other", "s1"),                   // 5: that key for another request
			withKey("Keyed", "b1"),                   // 6: replays item 2
			`{"prompt":"p","allowed_verdicts":["a"],"idempotency_key":""}`, // 7: bad key
			`{"Prompt":"p","allowed_verdicts":["a"]}`,                      // 8: a field name in another case
			`{"prompt":"p","prompt":"q","allowed_verdicts":["a"]}`,         // 9: a field twice
		)
		wantStatuses := []int{200, 400, 200, 400, 200, 422, 200, 400, 400, 400}
		for i, want := range wantStatuses {
			r := results[i]
			if r.Status != want {
				t.Fatalf("item %d: status %d (%s), want %d", i, r.Status, r.Error, want)
			}
			if want == 200 && (r.Task == nil || r.Replayed == nil || r.Error != "") {
				t.Fatalf("item %d = %+v, want a task and replayed", i, r)
			}
			if want != 200 && (r.Task != nil || r.Error == "") {
				t.Fatalf("item %d = %+v, want an error sentence only", i, r)
			}
		}
		if *results[0].Replayed || *results[2].Replayed || !*results[4].Replayed || !*results[6].Replayed {
			t.Fatalf("replayed flags = %v %v %v %v", *results[0].Replayed, *results[2].Replayed, *results[4].Replayed, *results[6].Replayed)
		}
		if results[4].Task["id"] != single["id"] || results[6].Task["id"] != results[2].Task["id"] {
			t.Fatal("replays carry other tasks")
		}
		for i, word := range map[int]string{1: "prompt", 3: "object", 7: "dempotency", 8: "Prompt", 9: "twice"} {
			if !strings.Contains(results[i].Error, word) {
				t.Errorf("item %d error %q does not mention %q", i, results[i].Error, word)
			}
		}
		// An item's key replays on the single endpoint too.
		if task, replayed := createKeyed(t, a, key, `{"allowed_verdicts":["approve","reject"],"prompt":"Keyed"}`, "b1"); !replayed || task["id"] != results[2].Task["id"] {
			t.Fatalf("the batch item's key on POST /v1/tasks = %v", task)
		}
		if used := a.usage("a@example.com"); used != 3 {
			t.Fatalf("usage = %d, want 3 (single, items 0 and 2)", used)
		}
	})
}

func TestTaskBatchCreate_CapAdmitsExactlyWhatFits(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{DailyTaskCap: 4}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		createTask(t, a, key, goodTask)
		results := createBatch(t, a, key,
			withKey("One", "k1"), goodTask, withKey("One", "k1"), withKey("Three", "k3"),
			withKey("Four", "k4"), goodTask, withKey("Four", "k4"))
		wantStatuses := []int{200, 200, 200, 200, 429, 429, 429}
		for i, want := range wantStatuses {
			if results[i].Status != want {
				t.Fatalf("item %d: %d %s, want %d", i, results[i].Status, results[i].Error, want)
			}
		}
		if !*results[2].Replayed || results[2].Task["id"] != results[0].Task["id"] {
			t.Fatalf("item 2 = %+v, want a replay of item 0", results[2])
		}
		if used := a.usage("a@example.com"); used != 4 {
			t.Fatalf("usage = %d, want the cap, 4", used)
		}
	})
}

func TestTaskBatchCreate_InvalidEnvelopeStoresNothing(t *testing.T) {
	t.Parallel()
	items := func(n int) string {
		return `{"tasks":[` + strings.TrimSuffix(strings.Repeat(goodTask+",", n), ",") + `]}`
	}
	big := `{"tasks":[{"prompt":"` + strings.Repeat("a", arbiter.MaxBodyBytes) + `","allowed_verdicts":["a"]}]}`
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		for _, tc := range []struct {
			name, body string
			status     int
			mention    string
		}{
			{"NotAnObject", `[` + goodTask + `]`, 400, "object"},
			{"NoTasks", `{}`, 400, "tasks"},
			{"TasksNull", `{"tasks":null}`, 400, "tasks"},
			{"TasksNotArray", `{"tasks":{}}`, 400, "tasks"},
			{"Empty", items(0), 400, "at least one"},
			{"TooMany", items(101), 400, "at most 100"},
			{"UnknownField", `{"tasks":[` + goodTask + `],"atomic":true}`, 400, "atomic"},
			{"TasksTwice", `{"tasks":[` + goodTask + `],"tasks":[` + goodTask + `]}`, 400, "twice"},
			{"MalformedJSON", `{"tasks":[`, 400, "JSON"},
			{"TooLarge", big, 413, "bytes"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, h, b := a.do("POST", "/v1/tasks/batch", key, tc.body)
				if msg := wantError(t, status, h, b, tc.status); !strings.Contains(msg, tc.mention) {
					t.Errorf("error %q does not mention %q", msg, tc.mention)
				}
			})
		}
		status, h, b := a.doKeyed("POST", "/v1/tasks/batch", key, items(1), "k1")
		if msg := wantError(t, status, h, b, 400); !strings.Contains(msg, "idempotency_key") {
			t.Errorf("a batch with an Idempotency-Key header: %q", msg)
		}
		if used := a.usage("a@example.com"); used != 0 {
			t.Fatalf("usage = %d after refused batches, want 0", used)
		}
		// 100 tasks is the limit, not past it.
		results := createBatch(t, a, key, strings.Split(strings.TrimSuffix(strings.Repeat(goodTask+"\n", 100), "\n"), "\n")...)
		for i, r := range results {
			if r.Status != 200 {
				t.Fatalf("item %d of 100: %d %s", i, r.Status, r.Error)
			}
		}
	})
}

func TestTaskCreate_FieldNamesAreExact(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		for body, mention := range map[string]string{
			`{"PROMPT":"p","allowed_verdicts":["a"]}`:                          `"PROMPT"`,
			`{"prompt":"p","Allowed_Verdicts":["a"]}`:                          `"Allowed_Verdicts"`,
			`{"prompt":"p","prompt":"q","allowed_verdicts":["a"]}`:             "twice",
			`{"prompt":"p","allowed_verdicts":["a"],"allowed_verdicts":["b"]}`: "twice",
			`{"prompt":"p","allowed_verdicts":["a"],"idempotency_key":"k"}`:    "idempotency_key",
		} {
			status, h, b := a.do("POST", "/v1/tasks", key, body)
			if msg := wantError(t, status, h, b, 400); !strings.Contains(msg, mention) {
				t.Errorf("%s: error %q does not mention %s", body, msg, mention)
			}
		}
		// Escaped names are the names they spell.
		createTask(t, a, key, `{"\u0070rompt":"p","allowed_verdicts":["a"],"context":{"PROMPT":1,"prompt":2}}`)
		if used := a.usage("a@example.com"); used != 1 {
			t.Fatalf("usage = %d, want 1", used)
		}
	})
}
