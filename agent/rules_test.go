package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
)

// loadTestRules loads testdata/rules.txt.
func loadTestRules(t testing.TB) *agent.Rules {
	t.Helper()
	rs, err := agent.LoadRules("testdata/rules.txt")
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestRules_Verify(t *testing.T) {
	rs := loadTestRules(t)
	batch := task("decide", "p", "", "hold", "release")
	batch.Source = "batch"
	cases := []struct {
		name       string
		task       *arbiter.Task
		verdict    string // "" for no decision
		confidence float64
		line       int
	}{
		{"FirstMatchWins", task("refund", "p", `{"amount":12,"customer":{"chargebacks":5}}`, "approve", "reject"), "approve", 0.95, 2},
		{"ContextFieldsDecide", task("refund", "p", `{"amount":120,"customer":{"chargebacks":5}}`, "approve", "reject"), "reject", 0.9, 3},
		{"MissingFieldDoesNotMatch", task("refund", "p", `{"amount":120}`, "approve", "reject"), "", 0, 0},
		{"NullContextDoesNotMatch", task("refund", "p", "", "approve", "reject"), "", 0, 0},
		{"OtherTaskTypeDoesNotMatch", task("payout", "p", `{"amount":12}`, "approve", "reject"), "", 0, 0},
		{"QuotedVerdict", task("decide", "a lawsuit is coming", "", "needs legal", "ok"), "needs legal", 0.99, 6},
		{"TabSeparatedRule", batch, "hold", 0.7, 9},
		{"RuleOfAVerdictNotAllowedIsSkipped", task("refund", "p", `{"amount":12}`, "reject", "escalate"), "escalate", 0.5, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rs.Verify(context.Background(), tc.task)
			if err != nil {
				t.Fatal(err)
			}
			want := arbiter.Verification{Model: "rules", Rationale: "No rule matched."}
			if tc.verdict != "" {
				want = arbiter.Verification{Decided: true, Verdict: tc.verdict, Confidence: tc.confidence, Model: "rules"}
				if !strings.HasPrefix(got.Rationale, "rule at line ") {
					t.Errorf("rationale %q does not name the rule", got.Rationale)
				}
				want.Rationale = got.Rationale
			}
			if got != want {
				t.Fatalf("Verify = %+v, want %+v", got, want)
			}
			if tc.line != 0 && !strings.HasPrefix(got.Rationale, "rule at line "+strconv.Itoa(tc.line)+": ") {
				t.Errorf("rationale %q, want rule at line %d", got.Rationale, tc.line)
			}
		})
	}

	t.Run("RationaleQuotesTheRule", func(t *testing.T) {
		got, _ := rs.Verify(context.Background(), cases[0].task)
		if want := `rule at line 2: task.task_type == "refund" && context.amount < 50`; got.Rationale != want {
			t.Errorf("rationale = %q, want %q", got.Rationale, want)
		}
	})
}

func TestRules_VerifyAtRuntime(t *testing.T) {
	rs, err := agent.ParseRules("inline", []byte(strings.Join([]string{
		`flagged 0.9 context.flag`,
		`big     0.8 context.amount / context.count > 10`,
		`strict  0.7 task.confidence_threshold >= 0.9`,
		`any     0.6 true`,
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, context string
		threshold     float64
		want          string
	}{
		{"DynTrueMatches", `{"flag":true}`, 0.8, "flagged"},
		{"DynNonBoolIsNoMatch", `{"flag":"yes","amount":100,"count":2}`, 0.8, "big"},
		{"EvaluationErrorIsNoMatch", `{"amount":100,"count":"two"}`, 0.8, "any"},
		{"TaskFieldsUsable", `{}`, 0.95, "strict"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tk := task("decide", "p", tc.context, "flagged", "big", "strict", "any")
			tk.ConfidenceThreshold = tc.threshold
			got, err := rs.Verify(context.Background(), tk)
			if err != nil || got.Verdict != tc.want {
				t.Fatalf("Verify = %+v, %v; want %q", got, err, tc.want)
			}
		})
	}

	t.Run("ErrContextNotJSON", func(t *testing.T) {
		if _, err := rs.Verify(context.Background(), task("decide", "p", `{not json`, "any")); err == nil {
			t.Fatal("Verify of a task whose context is not JSON succeeded")
		}
	})

	t.Run("ErrCancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := rs.Verify(ctx, task("decide", "p", "", "any")); err == nil {
			t.Fatal("Verify with a cancelled context succeeded")
		}
	})
}

func TestRules_VerifyConcurrently(t *testing.T) {
	rs := loadTestRules(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				amount := g*10 + i
				got, err := rs.Verify(context.Background(), task("refund", "p", `{"amount":`+strconv.Itoa(amount)+`,"customer":{"chargebacks":3}}`, "approve", "reject"))
				want := "reject"
				if amount < 50 {
					want = "approve"
				}
				if err != nil || got.Verdict != want {
					t.Errorf("amount %d: Verify = %+v, %v; want %s", amount, got, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestParseRules_BadRuleNamesItsLine(t *testing.T) {
	cases := []struct {
		name, line, wantErr string
	}{
		{"ErrSyntax", `reject 0.9 context.amount <`, "rules.txt:3: column 28: Syntax error"},
		{"ErrNotBool", `reject 0.9 1 + 2`, "of type int, not bool"},
		{"ErrIntNotBool", `reject 0.9 size(task.allowed_verdicts)`, "of type int, not bool"},
		{"ErrUnknownVariable", `reject 0.9 order.amount > 1`, "undeclared reference to 'order'"},
		{"ErrConfidenceAboveOne", `reject 1.5 true`, `confidence "1.5" must be a number between 0 and 1`},
		{"ErrConfidenceNegative", `reject -0.1 true`, "between 0 and 1"},
		{"ErrConfidenceNotANumber", `reject high true`, `confidence "high"`},
		{"ErrMissingVerdict", `0.9 context.amount > 1`, "no verdict"},
		{"ErrEmptyQuotedVerdict", `"" 0.9 true`, "verdict must be"},
		{"ErrNoExpression", `reject 0.9`, "no expression"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := "# comment\napprove 0.9 true\n" + tc.line + "\n\nok 0.5 true\n"
			rs, err := agent.ParseRules("rules.txt", []byte(src))
			if err == nil || !strings.HasPrefix(err.Error(), "rules.txt:3: ") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseRules = %v, %v; want an error at rules.txt:3 containing %q", rs, err, tc.wantErr)
			}
		})
	}

	t.Run("ErrNoRules", func(t *testing.T) {
		if _, err := agent.ParseRules("rules.txt", []byte("# only a comment\n\n")); err == nil || !strings.Contains(err.Error(), "no rules") {
			t.Fatalf("ParseRules of no rules = %v", err)
		}
	})

	t.Run("LoadRulesNamesTheFile", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bad.txt")
		if err := os.WriteFile(path, []byte("approve 0.9 )\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := agent.LoadRules(path); err == nil || !strings.HasPrefix(err.Error(), path+":1: ") {
			t.Fatalf("LoadRules of a bad file = %v, want an error naming %s:1", err, path)
		}
	})
}

func BenchmarkRules_Verify(b *testing.B) {
	rs := loadTestRules(b)
	tk := task("refund", "Refund order 1234?", `{"amount":120,"customer":{"id":"c_1","chargebacks":1},"items":[{"sku":"a","qty":2}]}`, "approve", "reject", "escalate")
	b.ReportAllocs()
	for b.Loop() {
		if got, err := rs.Verify(context.Background(), tk); err != nil || got.Verdict != "escalate" {
			b.Fatalf("Verify = %+v, %v", got, err)
		}
	}
}

// BenchmarkRules_VerifyContextUnread: a rule that reads no context, as the
// bench's instant verifier (approve 0.99 true), over a context of ~1 KiB.
func BenchmarkRules_VerifyContextUnread(b *testing.B) {
	rs, err := agent.ParseRules("rules.txt", []byte("approve 0.99 true\n"))
	if err != nil {
		b.Fatal(err)
	}
	tk := task("refund", "Refund order 1234?", `{"order_id":"ord_58213","customer":{"id":"cus_9921","since":"2021-04-02","orders":17},"items":[`+
		strings.Repeat(`{"sku":"SKU-01000","name":"Ceramic pour-over coffee dripper","qty":1,"price":24.9},`, 8)+
		`{"sku":"SKU-01008","qty":1,"price":24.9}],"total":199.2,"currency":"EUR"}`, "approve", "reject")
	b.ReportAllocs()
	for b.Loop() {
		if got, err := rs.Verify(context.Background(), tk); err != nil || got.Verdict != "approve" {
			b.Fatalf("Verify = %+v, %v", got, err)
		}
	}
}
