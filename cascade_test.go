package arbiter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

var cascadeRetry = arbiter.AgentRetry{Backoff: func(n int) time.Duration { return time.Second << n }, CallTimeout: 30 * time.Second}

func TestPlanCascade(t *testing.T) {
	task := &arbiter.Task{ConfidenceThreshold: 0.8}
	defaults := []string{"rules", "small", "large"}
	certs := func(name string) *float64 {
		if name == "small" {
			return ref(0.93)
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		p    *arbiter.Policy
		want []arbiter.CascadeStage
	}{
		{"no policy: the file's cascade at the task's threshold", nil,
			[]arbiter.CascadeStage{{"rules", 0.8}, {"small", 0.8}, {"large", 0.8}}},
		{"the policy's cascade and thresholds", &arbiter.Policy{Agent: arbiter.PolicyAgent{Cascade: []string{"small", "large"},
			Thresholds: map[string]*float64{"small": ref(0.97), "large": ref(0.9)}}},
			[]arbiter.CascadeStage{{"small", 0.97}, {"large", 0.9}}},
		{"a verifier the thresholds leave unset takes the task's", &arbiter.Policy{Agent: arbiter.PolicyAgent{
			Thresholds: map[string]*float64{"large": ref(0.9)}}},
			[]arbiter.CascadeStage{{"rules", 0.8}, {"small", 0.8}, {"large", 0.9}}},
		{"certified: a certificate, or pass everything on", &arbiter.Policy{Agent: arbiter.PolicyAgent{
			Certified: &arbiter.ErrorTarget{ErrorRate: 0.05, Confidence: 0.95}, Thresholds: map[string]*float64{"rules": ref(0.99)}}},
			[]arbiter.CascadeStage{{"rules", 0.99}, {"small", 0.93}, {"large", arbiter.PassAll}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := arbiter.PlanCascade(task, tc.p, defaults, certs)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("stage %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestStageOf(t *testing.T) {
	stages := []arbiter.CascadeStage{{"rules", 0.9}, {"small", 0.9}, {"large", 0.9}}
	for stage, want := range map[int]int{0: 0, 1: 1, 2: 2, 5: 2, -1: 0} {
		if got := arbiter.StageOf(&arbiter.Task{CascadeStage: stage}, stages); got != want {
			t.Errorf("StageOf(stage %d) = %d, want %d", stage, got, want)
		}
	}
}

// TestNextCascadeStep is the cascade's step as a table: an answer above
// or below each verifier's threshold, a declined one, failures, throttles
// far from and near the deadline, a verdict outside the set.
func TestNextCascadeStep(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	started := now.Add(-2 * time.Second)
	stages := []arbiter.CascadeStage{{"rules", 0.99}, {"small", 0.95}, {"large", 0.9}}
	answer := func(verdict string, c float64) arbiter.Verification {
		return arbiter.Verification{Decided: true, Verdict: verdict, Confidence: c, Model: "m", Usage: arbiter.Usage{InputTokens: 100, OutputTokens: 10}}
	}
	soon := arbiter.TimestampOf(now.Add(20 * time.Second))
	later := arbiter.TimestampOf(now.Add(time.Hour))
	for _, tc := range []struct {
		name      string
		stage     int
		failures  int
		deadline  *arbiter.Timestamp
		v         arbiter.Verification
		err       error
		next      string
		passedOn  bool
		reset     bool
		throttled bool
		reason    string
	}{
		{"rules at its threshold decides", 0, 0, nil, answer("approve", 0.99), nil, arbiter.StatusCompleted, false, false, false, ""},
		{"rules below passes to small", 0, 0, nil, answer("approve", 0.98), nil, arbiter.StatusPending, true, true, false, ""},
		{"a declined rule passes on", 0, 0, nil, arbiter.Verification{Model: "rules", Rationale: "No rule matched."}, nil, arbiter.StatusPending, true, true, false, ""},
		{"small above its own threshold decides", 1, 0, nil, answer("reject", 0.96), nil, arbiter.StatusCompleted, false, false, false, ""},
		{"large below its threshold goes to people", 2, 0, nil, answer("reject", 0.89), nil, arbiter.StatusHumanNeeded, false, false, false, ""},
		{"large at 0.9 decides", 2, 0, nil, answer("reject", 0.9), nil, arbiter.StatusCompleted, false, false, false, ""},
		{"a failed call is retried on the same verifier", 1, 0, nil, arbiter.Verification{Model: "m"},
			&arbiter.VerifierError{Reason: arbiter.VerifierUnreachable}, arbiter.StatusPending, false, false, false, arbiter.VerifierUnreachable},
		{"the third failure passes on", 1, 2, nil, arbiter.Verification{Model: "m"},
			&arbiter.VerifierError{Reason: arbiter.VerifierUnreachable}, arbiter.StatusPending, true, true, false, arbiter.VerifierUnreachable},
		{"the last verifier's third failure goes to people", 2, 2, nil, arbiter.Verification{Model: "m"},
			&arbiter.VerifierError{Reason: arbiter.VerifierTimedOut}, arbiter.StatusHumanNeeded, false, false, false, arbiter.VerifierTimedOut},
		{"a verdict outside the set is a failure", 1, 0, nil, answer("maybe", 0.99), nil, arbiter.StatusPending, false, false, false, arbiter.VerifierVerdictOutsideSet},
		{"throttled far from the deadline waits", 1, 0, &later, arbiter.Verification{Model: "m"},
			&arbiter.ThrottledError{RetryAfter: 5 * time.Second}, arbiter.StatusPending, false, false, true, ""},
		{"throttled near the deadline passes on", 1, 0, &soon, arbiter.Verification{Model: "m"},
			&arbiter.ThrottledError{RetryAfter: 5 * time.Second}, arbiter.StatusPending, true, true, false, arbiter.VerifierThrottled},
		{"the last verifier throttled near the deadline goes to people", 2, 0, &soon, arbiter.Verification{Model: "m"},
			&arbiter.ThrottledError{RetryAfter: 5 * time.Second}, arbiter.StatusHumanNeeded, false, false, false, arbiter.VerifierThrottled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &arbiter.Task{AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.5, Failures: tc.failures, DeadlineAt: tc.deadline}
			step := arbiter.NextCascadeStep(task, stages, tc.stage, tc.v, tc.err, started, now, cascadeRetry)
			if step.Next != tc.next || step.Attempt.PassedOn != tc.passedOn || step.ResetFailures != tc.reset || step.Throttled != tc.throttled {
				t.Fatalf("step %+v; want next %s, passed on %v, reset %v, throttled %v", step, tc.next, tc.passedOn, tc.reset, tc.throttled)
			}
			if tc.throttled {
				return
			}
			if step.Attempt.Verifier == nil || *step.Attempt.Verifier != stages[tc.stage].Verifier {
				t.Errorf("the attempt names %v, want %s", step.Attempt.Verifier, stages[tc.stage].Verifier)
			}
			if (tc.reason == "") != (step.Attempt.Error == nil) || (tc.reason != "" && *step.Attempt.Error != tc.reason) {
				t.Errorf("attempt error %v, want %q", step.Attempt.Error, tc.reason)
			}
			if tc.passedOn && (step.RunAfter != arbiter.TimestampOf(now) || step.Stage != tc.stage+1) {
				t.Errorf("passed on to run at %v at stage %d, want now at %d", step.RunAfter, step.Stage, tc.stage+1)
			}
			if !tc.passedOn && step.Stage != tc.stage {
				t.Errorf("stage %d after the step, want %d", step.Stage, tc.stage)
			}
			if tc.v.Usage != (arbiter.Usage{}) && (step.Attempt.InputTokens == nil || *step.Attempt.InputTokens != 100 || *step.Attempt.OutputTokens != 10) {
				t.Errorf("usage not recorded: %+v", step.Attempt)
			}
		})
	}
	if step := arbiter.NextCascadeStep(&arbiter.Task{AllowedVerdicts: []string{"a"}}, []arbiter.CascadeStage{{"x", arbiter.PassAll}}, 0,
		answer("a", 1), nil, started, now, cascadeRetry); step.Next != arbiter.StatusHumanNeeded {
		t.Errorf("a certain answer reached PassAll: %+v", step)
	}
}

func TestSkipAndRequirePersonSteps(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	stages := []arbiter.CascadeStage{{"gone", 0.9}, {"large", 0.9}}
	s := arbiter.SkipStep(stages, 0, now)
	if s.Next != arbiter.StatusPending || !s.Attempt.PassedOn || s.Attempt.Error == nil || *s.Attempt.Error != `no verifier named "gone" in the verifiers file` {
		t.Errorf("skip: %+v", s)
	}
	if s := arbiter.SkipStep(stages, 1, now); s.Next != arbiter.StatusHumanNeeded || s.Attempt.PassedOn {
		t.Errorf("skipping the last: %+v", s)
	}
	r := arbiter.RequirePersonStep("context.amount > 1000", now)
	if r.Next != arbiter.StatusHumanNeeded || r.Attempt.Error != nil || r.Attempt.Verdict != nil ||
		r.Attempt.Rationale != `The policy requires a person for this task: require_person_if "context.amount > 1000" matched.` {
		t.Errorf("require a person: %+v", r)
	}
	if c := arbiter.CostOf(arbiter.Price{InputPerMillion: 3, OutputPerMillion: 15}, arbiter.Usage{InputTokens: 1000, OutputTokens: 100}); c == nil || !near(*c, 0.0045) {
		t.Errorf("cost %v, want 0.0045", c)
	}
	if arbiter.CostOf(arbiter.Price{InputPerMillion: 3}, arbiter.Usage{}) != nil {
		t.Error("no usage has a cost")
	}
	_ = errors.New
}

func TestPolicyAgent_Validate(t *testing.T) {
	for body, field := range map[string]string{
		`{"cascade":["Small"]}`:                                     "cascade",
		`{"cascade":["a","a"]}`:                                     "cascade",
		`{"cascade":[null]}`:                                        "cascade",
		`{"thresholds":{"small":1.5}}`:                              "thresholds",
		`{"thresholds":{"Bad Name":0.5}}`:                           "thresholds",
		`{"certified":{"target_error_rate":0}}`:                     "certified",
		`{"certified":{"confidence":0.9}}`:                          "certified",
		`{"require_person_if":"context.amount >"}`:                  "require_person_if",
		`{"require_person_if":"context.amount + 1"}`:                "require_person_if",
		`{"cascade":"small"}`:                                       "cascade",
		`{"thresholds":{"small":"high"}}`:                           "thresholds",
		`{"require_person_if":true}`:                                "require_person_if",
		`{"certified":{"target_error_rate":0.05,"confidence":0.3}}`: "certified",
	} {
		_, err := arbiter.ParsePolicy("refund", []byte(body))
		var e *arbiter.Error
		if arbiter.ErrorCode(err) != arbiter.EINVALID || !errors.As(err, &e) || e.Field != field {
			t.Errorf("%s: %v (field %q), want EINVALID naming %s", body, err, errorField(err), field)
		}
	}
	p, err := arbiter.ParsePolicy("refund", []byte(`{"cascade":["rules","small","large"],"thresholds":{"small":0.97,"large":0.9},
		"certified":{"target_error_rate":0.05},"require_person_if":"context.amount > 1000"}`))
	if err != nil || len(p.Agent.Cascade) != 3 || *p.Agent.Thresholds["small"] != 0.97 || p.Agent.Certified.Confidence != 0.95 ||
		p.Agent.RequirePersonIf != "context.amount > 1000" {
		t.Fatalf("%+v, %v", p.Agent, err)
	}
}

func errorField(err error) string {
	var e *arbiter.Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

func TestRequirePerson(t *testing.T) {
	task := &arbiter.Task{TaskType: "refund", Context: []byte(`{"amount": 1200}`)}
	for expr, want := range map[string]bool{
		"context.amount > 1000":                               true,
		"context.amount > 5000":                               false,
		`task.task_type == "refund" && context.amount > 1000`: true,
		"context.customer.vip":                                false, // a missing field is no match
	} {
		if got, err := arbiter.RequirePerson(expr, task); err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", expr, got, err, want)
		}
	}
	if _, err := arbiter.RequirePerson("context.amount >", task); err == nil {
		t.Error("an expression that does not compile matched nothing without an error")
	}
}
