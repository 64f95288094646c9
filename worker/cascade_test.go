package worker_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/fakellm"
	"github.com/arbiterhq/arbiter/worker"
)

// cascadeScript answers from the task's context: context.small is the
// verdicts the small model gives, answer by answer, and context.large the
// large model's verdict and confidence; "down" answers 500, "busy" 429.
func cascadeScript(model string) fakellm.Script {
	return func(task map[string]any, n int) fakellm.Reply {
		ctx, _ := task["context"].(map[string]any)
		switch model {
		case "small":
			verdicts, _ := ctx["small"].([]any)
			if len(verdicts) == 0 {
				return fakellm.Reply{Status: 500}
			}
			v, _ := verdicts[n%len(verdicts)].(string)
			if v == "down" {
				return fakellm.Reply{Status: 500}
			}
			return fakellm.Reply{Verdict: v, Confidence: 0.9, Rationale: "small says " + v}
		default:
			large, _ := ctx["large"].(map[string]any)
			v, _ := large["verdict"].(string)
			c, _ := large["confidence"].(float64)
			return fakellm.Reply{Verdict: v, Confidence: c, Rationale: "large says " + v}
		}
	}
}

// cascadeOf builds the example cascade — rules, then a small model behind
// an OpenAI-compatible server that samples five answers, then a large one
// behind Anthropic's API — against fake providers.
func cascadeOf(t *testing.T) (*agent.Verifiers, *fakellm.Server, *fakellm.Server) {
	t.Helper()
	small, large := fakellm.OpenAI(cascadeScript("small"), false), fakellm.Anthropic(cascadeScript("large"))
	t.Cleanup(small.Close)
	t.Cleanup(large.Close)
	rules := filepath.Join(t.TempDir(), "rules.txt")
	os.WriteFile(rules, []byte("approve 0.99 context.amount < 20\n"), 0o600)
	set := arbiter.VerifierSet{Cascade: []string{"rules", "small", "large"}, Verifiers: []arbiter.VerifierSpec{
		{Name: "rules", Backend: "rules", RulesFile: rules},
		{Name: "small", Backend: "openai", BaseURL: small.URL + "/v1", Model: "small-7b", Version: "small-v1",
			Price: arbiter.Price{InputPerMillion: 0.15, OutputPerMillion: 0.6}, Confidence: arbiter.ConfidenceSpec{Source: "sampling", Samples: 5}},
		{Name: "large", Backend: "anthropic", BaseURL: large.URL, Model: "large-xl", APIKeyEnv: "LARGE_KEY",
			Price: arbiter.Price{InputPerMillion: 3, OutputPerMillion: 15}},
	}}
	v, err := agent.Build(set, func(string) string { return "sk-large" }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v, small, large
}

// TestWorker_Cascade runs tasks through rules → small → large → people on
// both stores: each stage decides at or above its threshold (the task's
// 0.8, the policy's 0.95 for small), passes the task on below it, and
// names itself on the attempt and, when it decides, as final_verifier; the
// attempts carry their tokens and cost; a small model that is down passes
// on after three failures; require_person_if sends a task to people before
// any verifier is asked.
func TestWorker_Cascade(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store := dbtest.Open(t, dialect, db.Options{})
			verifiers, small, large := cascadeOf(t)
			acct, err := store.FindOrCreateAccountByEmail(ctx, "ops@example.com")
			if err != nil {
				t.Fatal(err)
			}
			owner := arbiter.Actor{Email: "ops@example.com"}
			if _, err := store.PutPolicy(ctx, acct.ID, arbiter.Policy{TaskType: "refund", Agent: arbiter.PolicyAgent{
				Thresholds: map[string]*float64{"small": ref(0.95)}, RequirePersonIf: "context.amount > 1000"}}, owner); err != nil {
				t.Fatal(err)
			}
			runUntilStopped(t, "worker", 10*time.Second, worker.New(worker.Config{
				Queue: store, Verifiers: verifiers, Policies: store, Health: store, Logger: slog.New(slog.DiscardHandler),
				Concurrency: 8, Poll: 10 * time.Millisecond, Backoff: 10 * time.Millisecond, Grace: time.Second,
			}).Run)
			create := func(contextJSON string) string {
				t.Helper()
				task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
					ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "chat", Context: []byte(contextJSON)})
				if err != nil {
					t.Fatal(err)
				}
				return task.ID
			}
			for _, tc := range []struct {
				name, context, status, verifier string
				path                            []string // the verifiers asked, in order
			}{
				{"rules decide a small refund", `{"amount":10}`, arbiter.StatusCompleted, "rules", []string{"rules"}},
				{"five of five from small decide", `{"amount":300,"small":["approve"]}`, arbiter.StatusCompleted, "small",
					[]string{"rules", "small"}},
				{"four of five is under small's 0.95: large decides", `{"amount":300,"small":["approve","approve","reject","approve","approve"],
					"large":{"verdict":"approve","confidence":0.92}}`, arbiter.StatusCompleted, "large", []string{"rules", "small", "large"}},
				{"large under the task's 0.8 goes to people", `{"amount":300,"small":["approve","reject"],
					"large":{"verdict":"reject","confidence":0.6}}`, arbiter.StatusHumanNeeded, "", []string{"rules", "small", "large"}},
				{"small down passes on after three failures", `{"amount":300,"small":["down"],"large":{"verdict":"reject","confidence":0.97}}`,
					arbiter.StatusCompleted, "large", []string{"rules", "small", "small", "small", "large"}},
				{"require_person_if asks nobody", `{"amount":5000,"small":["approve"],"large":{"verdict":"approve","confidence":1}}`,
					arbiter.StatusHumanNeeded, "", []string{""}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					id := create(tc.context)
					task := waitFor(t, store, acct.ID, id, settled)
					var path []string
					for _, a := range task.Attempts {
						path = append(path, deref(a.Verifier))
					}
					if task.Status != tc.status || deref(task.FinalVerifier) != tc.verifier || strings.Join(path, " ") != strings.Join(tc.path, " ") {
						t.Fatalf("task %s decided by %q, asked %v; want %s by %q, asked %v", task.Status, deref(task.FinalVerifier), path,
							tc.status, tc.verifier, tc.path)
					}
					for i, a := range task.Attempts {
						last := i == len(task.Attempts)-1
						nextDiffers := !last && deref(task.Attempts[i+1].Verifier) != deref(a.Verifier)
						if a.PassedOn != nextDiffers {
							t.Errorf("attempt %d (%s) passed_on %v", i, deref(a.Verifier), a.PassedOn)
						}
						switch deref(a.Verifier) {
						case "small":
							if a.Error == nil && (a.InputTokens == nil || *a.InputTokens != 5*fakellm.InputTokens || a.Cost == nil ||
								!near(*a.Cost, (5*fakellm.InputTokens*0.15+5*fakellm.OutputTokens*0.6)/1e6) || deref(a.Version) != "small-v1") {
								t.Errorf("small's attempt: %+v", a)
							}
						case "large":
							if a.InputTokens == nil || *a.InputTokens != fakellm.InputTokens || a.Cost == nil ||
								!near(*a.Cost, (fakellm.InputTokens*3+fakellm.OutputTokens*15)/1e6) || deref(a.Model) != "large-xl" {
								t.Errorf("large's attempt: %+v", a)
							}
						case "":
							if !strings.Contains(a.Rationale, "require_person_if") {
								t.Errorf("the policy's attempt: %+v", a)
							}
						}
					}
				})
			}
			if small.Requests() == 0 || large.Requests() == 0 {
				t.Errorf("the fakes were asked %d and %d times", small.Requests(), large.Requests())
			}
		})
	}
}

func ref[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

// namedVerifiers is a cascade of in-process verifiers, for tests.
type namedVerifiers struct {
	cascade []string
	specs   map[string]arbiter.VerifierSpec
	answers map[string]verifierFunc
}

func (n namedVerifiers) Cascade() []string { return n.cascade }

func (n namedVerifiers) Verifier(name string) (arbiter.Verifier, arbiter.VerifierSpec, bool) {
	v, ok := n.answers[name]
	return v, n.specs[name], ok
}

// TestWorker_CertifiedCascadeBootstrapsFromNothing runs a certified
// policy (each verifier at its own certificate) from an empty store on
// both stores: with no certificate, small and large pass every task on
// and people decide; each decision labels both verifiers' answers; once
// the labels certify a threshold, a worker that reads the certificates
// anew has small decide at it; and a new version of small starts its
// series anew, passing the task to large, which decides at its own.
func TestWorker_CertifiedCascadeBootstrapsFromNothing(t *testing.T) {
	t.Parallel()
	target := arbiter.ErrorTarget{ErrorRate: 0.2, Confidence: 0.8}
	cascade := func(smallVersion string) namedVerifiers {
		return namedVerifiers{cascade: []string{"small", "large"},
			specs:   map[string]arbiter.VerifierSpec{"small": {Name: "small", Version: smallVersion}, "large": {Name: "large", Version: "l1"}},
			answers: map[string]verifierFunc{"small": answer("approve", 0.9), "large": answer("approve", 0.95)}}
	}
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store := dbtest.Open(t, dialect, db.Options{})
			acct, err := store.FindOrCreateAccountByEmail(ctx, "ops@example.com")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.PutPolicy(ctx, acct.ID, arbiter.Policy{TaskType: "refund",
				Agent: arbiter.PolicyAgent{Certified: &target}}, arbiter.Actor{Email: "ops@example.com"}); err != nil {
				t.Fatal(err)
			}
			run := func(verifiers namedVerifiers) (stop func()) {
				return runUntilStopped(t, "worker", 10*time.Second, worker.New(worker.Config{
					Queue: store, Verifiers: verifiers, Policies: store, Certificates: store, Health: store,
					Logger: slog.New(slog.DiscardHandler), Concurrency: 4, Poll: 10 * time.Millisecond, Backoff: 10 * time.Millisecond,
					Grace: time.Second,
				}).Run)
			}
			create := func() *arbiter.Task {
				t.Helper()
				task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
					ConfidenceThreshold: 0.5, TaskType: "refund", Touchpoint: "chat", Context: []byte(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				return waitFor(t, store, acct.ID, task.ID, settled)
			}
			certified := func(verifier, version string) *float64 {
				t.Helper()
				c, err := store.CertifiedThreshold(ctx, acct.ID, "refund", verifier, version, target)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			if certified("small", "s1") != nil || certified("large", "l1") != nil {
				t.Fatal("a certificate with no label")
			}

			stop := run(cascade("s1"))
			labels := 0
			for certified("small", "s1") == nil {
				if labels == 40 {
					t.Fatalf("40 agreeing labels certify nothing")
				}
				task := create()
				if task.Status != arbiter.StatusHumanNeeded || len(task.Attempts) != 2 || !task.Attempts[0].PassedOn ||
					deref(task.Attempts[0].Verifier) != "small" || deref(task.Attempts[1].Verifier) != "large" {
					t.Fatalf("with no certificate: %s, attempts %+v", task.Status, task.Attempts)
				}
				if _, err := store.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "rev@example.com"}); err != nil {
					t.Fatal(err)
				}
				labels++
			}
			stop()
			t.Logf("%d labels certify small", labels)
			if c := certified("small", "s1"); labels < 2 || *c != 0.9 {
				t.Fatalf("after %d labels small is certified at %v, want 0.9", labels, *c)
			}
			if c := certified("large", "l1"); c == nil || *c != 0.95 {
				t.Fatalf("large is certified at %v, want 0.95", fmtThreshold(c))
			}
			for verifier, want := range map[string]int{"": labels, "small": labels, "large": labels, "rules": 0} {
				data, err := store.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{Verifier: verifier})
				if err != nil {
					t.Fatal(err)
				}
				n, confidence := 0, 0.0
				for _, cell := range data.Evidence {
					n += cell.N
					confidence = cell.Lowest
				}
				if n != want || (n > 0 && confidence != map[string]float64{"": 0.95, "small": 0.9, "large": 0.95}[verifier]) {
					t.Errorf("the report of verifier %q holds %d labels at %v, want %d", verifier, n, confidence, want)
				}
			}

			stop = run(cascade("s1"))
			task := create()
			if task.Status != arbiter.StatusCompleted || deref(task.FinalTier) != arbiter.TierAgent || deref(task.FinalVerifier) != "small" ||
				len(task.Attempts) != 1 {
				t.Fatalf("small at its certificate: %s by %q, attempts %+v", task.Status, deref(task.FinalVerifier), task.Attempts)
			}
			stop()

			run(cascade("s2"))
			task = create()
			if task.Status != arbiter.StatusCompleted || deref(task.FinalVerifier) != "large" || len(task.Attempts) != 2 ||
				!task.Attempts[0].PassedOn || deref(task.Attempts[0].Version) != "s2" {
				t.Fatalf("small's new version: %s by %q, attempts %+v", task.Status, deref(task.FinalVerifier), task.Attempts)
			}
		})
	}
}

func fmtThreshold(c *float64) string {
	if c == nil {
		return "nothing"
	}
	return strconv.FormatFloat(*c, 'f', -1, 64)
}
