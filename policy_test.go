package arbiter_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func ref[T any](v T) *T { return &v }

// agentAttempt is an agent attempt that answered verdict at confidence.
func agentAttempt(verdict string, confidence float64) arbiter.Attempt {
	return arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence, StartedAt: 1}
}

func TestDeadlineStep(t *testing.T) {
	const now = arbiter.Timestamp(5000)
	failed := arbiter.Attempt{Tier: arbiter.TierAgent, Error: ref("verifier_timeout"), StartedAt: 1}
	audit := arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: ref("approve"), Confidence: ref(1.0), Audit: true, Reviewer: ref("r@example.com")}
	vote := func(verdict string) arbiter.Attempt {
		return arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: ref(verdict), Confidence: ref(1.0), PersonID: "per_ann", Reviewer: ref("ann@example.com")}
	}
	agentVerdict := func(floor float64, fallback string) arbiter.OnExpiry {
		return arbiter.OnExpiry{Outcome: arbiter.OnExpiryAgentVerdict, AgentFloor: &floor, Fallback: fallback}
	}
	for _, tc := range []struct {
		name     string
		onExpiry arbiter.OnExpiry
		attempts []arbiter.Attempt
		verdict  string   // "" when the task expires
		conf     *float64 // the fallback attempt's confidence
	}{
		{name: "the zero outcome expires", onExpiry: arbiter.OnExpiry{}},
		{name: "expire expires", onExpiry: arbiter.OnExpiry{Outcome: "expire"}, attempts: []arbiter.Attempt{agentAttempt("approve", 0.99)}},
		{name: "a fixed verdict decides", onExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"}, verdict: "reject"},
		{name: "a fixed verdict ignores the agent", onExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"},
			attempts: []arbiter.Attempt{agentAttempt("approve", 0.99)}, verdict: "reject"},
		{name: "a verdict no longer allowed expires", onExpiry: arbiter.OnExpiry{Outcome: "verdict:escalate"}},
		{name: "the agent above the floor decides", onExpiry: agentVerdict(0.9, "verdict:reject"),
			attempts: []arbiter.Attempt{agentAttempt("approve", 0.95)}, verdict: "approve", conf: ref(0.95)},
		{name: "the agent at the floor decides", onExpiry: agentVerdict(0.9, "verdict:reject"),
			attempts: []arbiter.Attempt{agentAttempt("approve", 0.9)}, verdict: "approve", conf: ref(0.9)},
		{name: "the agent just below the floor falls back", onExpiry: agentVerdict(0.9, "verdict:reject"),
			attempts: []arbiter.Attempt{agentAttempt("approve", 0.8999)}, verdict: "reject"},
		{name: "below the floor with fallback expire expires", onExpiry: agentVerdict(0.9, "expire"),
			attempts: []arbiter.Attempt{agentAttempt("approve", 0.5)}},
		{name: "below the floor without a fallback expires", onExpiry: agentVerdict(0.9, ""),
			attempts: []arbiter.Attempt{agentAttempt("approve", 0.5)}},
		{name: "no agent answer falls back", onExpiry: agentVerdict(0.1, "verdict:reject"), verdict: "reject"},
		{name: "a failed call is no answer", onExpiry: agentVerdict(0.1, "verdict:reject"),
			attempts: []arbiter.Attempt{failed}, verdict: "reject"},
		{name: "the last answer counts, not a failure after it", onExpiry: agentVerdict(0.5, "expire"),
			attempts: []arbiter.Attempt{agentAttempt("reject", 0.7), failed}, verdict: "reject", conf: ref(0.7)},
		{name: "the last answer counts, not a better one before", onExpiry: agentVerdict(0.9, "expire"),
			attempts: []arbiter.Attempt{agentAttempt("approve", 0.95), agentAttempt("reject", 0.6)}},
		{name: "a person's audit answer is not the agent's", onExpiry: agentVerdict(0.5, "expire"),
			attempts: []arbiter.Attempt{audit}},
		{name: "an agent verdict no longer allowed falls back", onExpiry: agentVerdict(0.5, "verdict:reject"),
			attempts: []arbiter.Attempt{agentAttempt("escalate", 0.99)}, verdict: "reject"},
		{name: "a fallback verdict no longer allowed expires", onExpiry: agentVerdict(0.9, "verdict:escalate"),
			attempts: []arbiter.Attempt{agentAttempt("approve", 0.5)}},
		{name: "a person's vote is not overridden by the opposite verdict", onExpiry: arbiter.OnExpiry{Outcome: "verdict:approve"},
			attempts: []arbiter.Attempt{agentAttempt("approve", 0.5), vote("reject")}},
		{name: "a vote expires the task even when the verdict agrees", onExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"},
			attempts: []arbiter.Attempt{vote("reject")}},
		{name: "a vote is not overridden by the agent's verdict", onExpiry: agentVerdict(0.5, "verdict:approve"),
			attempts: []arbiter.Attempt{agentAttempt("approve", 0.99), vote("reject")}},
		{name: "a blind audit's answer is not a vote", onExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"},
			attempts: []arbiter.Attempt{audit}, verdict: "reject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &arbiter.Task{AllowedVerdicts: []string{"approve", "reject"}, Attempts: tc.attempts, OnExpiry: tc.onExpiry}
			got := arbiter.DeadlineStep(task, tc.onExpiry, now)
			if tc.verdict == "" {
				if !got.Expire || got.Attempt.Verdict != nil {
					t.Fatalf("got %+v, want the task to expire", got)
				}
				return
			}
			a := got.Attempt
			switch {
			case got.Expire:
				t.Fatalf("the task expires, want it decided %q", tc.verdict)
			case a.Tier != arbiter.TierFallback || a.Verdict == nil || *a.Verdict != tc.verdict:
				t.Fatalf("attempt %+v, want tier fallback deciding %q", a, tc.verdict)
			case (tc.conf == nil) != (a.Confidence == nil) || (tc.conf != nil && *a.Confidence != *tc.conf):
				t.Errorf("confidence %v, want %v", a.Confidence, tc.conf)
			case a.StartedAt != now || a.FinishedAt == nil || *a.FinishedAt != now:
				t.Errorf("times %v–%v, want both %v", a.StartedAt, a.FinishedAt, now)
			case !strings.Contains(a.Rationale, "on_expiry") || !strings.Contains(a.Rationale, tc.verdict):
				t.Errorf("rationale %q does not say which rule decided", a.Rationale)
			case a.Model != nil || a.Reviewer != nil || a.Error != nil || a.Audit:
				t.Errorf("attempt %+v names a model, reviewer, error or audit", a)
			}
		})
	}
}

func TestDeadlinePassedError_AVotedTaskExpires(t *testing.T) {
	deadline := arbiter.Timestamp(5000)
	task := &arbiter.Task{AllowedVerdicts: []string{"approve", "reject"}, DeadlineAt: &deadline,
		OnExpiry: arbiter.OnExpiry{Outcome: "verdict:approve"}}
	if e := arbiter.DeadlinePassedError(task); !strings.Contains(e.Message, "decides it (approve)") {
		t.Errorf("without votes: %q, want the on-expiry outcome named", e.Message)
	}
	task.Attempts = []arbiter.Attempt{{Tier: arbiter.TierHuman, Verdict: ref("reject"), PersonID: "per_ann"}}
	if e := arbiter.DeadlinePassedError(task); strings.Contains(e.Message, "approve") || e.Reason != arbiter.ReasonTaskExpired {
		t.Errorf("with a vote: %q (%s), want the task expired, not approved", e.Message, e.Reason)
	}
}

func TestOnExpiry_Validate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     arbiter.OnExpiry
		field string // "" when valid
	}{
		{"zero", arbiter.OnExpiry{}, ""},
		{"expire", arbiter.OnExpiry{Outcome: "expire"}, ""},
		{"a verdict", arbiter.OnExpiry{Outcome: "verdict:approve"}, ""},
		{"a verdict with colons", arbiter.OnExpiry{Outcome: "verdict:a:b"}, ""},
		{"agent with floor", arbiter.OnExpiry{Outcome: "agent_verdict", AgentFloor: ref(0.9)}, ""},
		{"agent floor 0", arbiter.OnExpiry{Outcome: "agent_verdict", AgentFloor: ref(0.0), Fallback: "expire"}, ""},
		{"agent floor 1 with a verdict fallback", arbiter.OnExpiry{Outcome: "agent_verdict", AgentFloor: ref(1.0), Fallback: "verdict:no"}, ""},
		{"an empty verdict", arbiter.OnExpiry{Outcome: "verdict:"}, "on_expiry"},
		{"an unknown outcome", arbiter.OnExpiry{Outcome: "approve"}, "on_expiry"},
		{"a verdict too long", arbiter.OnExpiry{Outcome: "verdict:" + strings.Repeat("x", arbiter.MaxVerdictChars+1)}, "on_expiry"},
		{"agent without floor", arbiter.OnExpiry{Outcome: "agent_verdict"}, "agent_floor"},
		{"agent floor above 1", arbiter.OnExpiry{Outcome: "agent_verdict", AgentFloor: ref(1.01)}, "agent_floor"},
		{"agent floor below 0", arbiter.OnExpiry{Outcome: "agent_verdict", AgentFloor: ref(-0.1)}, "agent_floor"},
		{"agent fallback agent", arbiter.OnExpiry{Outcome: "agent_verdict", AgentFloor: ref(0.5), Fallback: "agent_verdict"}, "on_expiry_fallback"},
		{"a floor on a verdict", arbiter.OnExpiry{Outcome: "verdict:a", AgentFloor: ref(0.5)}, "agent_floor"},
		{"a fallback on expire", arbiter.OnExpiry{Outcome: "expire", Fallback: "verdict:a"}, "on_expiry_fallback"},
	} {
		err := tc.o.Validate()
		if tc.field == "" && err != nil {
			t.Errorf("%s: %v, want valid", tc.name, err)
		} else if tc.field != "" && (arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorField(err) != tc.field) {
			t.Errorf("%s: %v, want EINVALID naming %s", tc.name, err, tc.field)
		}
	}
}

func TestPolicy_Validate(t *testing.T) {
	valid := func() arbiter.Policy {
		return arbiter.Policy{TaskType: "refund", ConfidenceThreshold: ref(0.9), DeadlineSeconds: ref(3600),
			AuditRate: ref(0.05), OnExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"}}
	}
	for _, tc := range []struct {
		name   string
		change func(*arbiter.Policy)
		field  string
	}{
		{"valid", func(*arbiter.Policy) {}, ""},
		{"only a type", func(p *arbiter.Policy) { *p = arbiter.Policy{TaskType: "default"} }, ""},
		{"no type", func(p *arbiter.Policy) { p.TaskType = "" }, "task_type"},
		{"a type too long", func(p *arbiter.Policy) { p.TaskType = strings.Repeat("t", arbiter.MaxLabelChars+1) }, "task_type"},
		{"threshold above 1", func(p *arbiter.Policy) { p.ConfidenceThreshold = ref(1.5) }, "confidence_threshold"},
		{"deadline too short", func(p *arbiter.Policy) { p.DeadlineSeconds = ref(59) }, "deadline_seconds"},
		{"deadline too long", func(p *arbiter.Policy) { p.DeadlineSeconds = ref(arbiter.MaxDeadlineSeconds + 1) }, "deadline_seconds"},
		{"audit rate above 1", func(p *arbiter.Policy) { p.AuditRate = ref(2.0) }, "audit_rate"},
		{"a bad outcome", func(p *arbiter.Policy) { p.OnExpiry = arbiter.OnExpiry{Outcome: "agent_verdict"} }, "agent_floor"},
		{"an outcome without a deadline", func(p *arbiter.Policy) { p.DeadlineSeconds = nil }, "deadline_seconds"},
		{"expire without a deadline", func(p *arbiter.Policy) { p.DeadlineSeconds, p.OnExpiry = nil, arbiter.OnExpiry{} }, ""},
		{"a Slack channel", func(p *arbiter.Policy) { p.Notify = []string{"slack:#refunds", "slack:C0123456"} }, ""},
		{"a target not Slack's", func(p *arbiter.Policy) { p.Notify = []string{"mail:a@example.com"} }, "notify"},
		{"a channel not in lower case", func(p *arbiter.Policy) { p.Notify = []string{"slack:#Refunds"} }, "notify"},
		{"too many targets", func(p *arbiter.Policy) {
			p.Notify = []string{"slack:#a", "slack:#b", "slack:#c", "slack:#d", "slack:#e", "slack:#f"}
		}, "notify"},
		{"two reviews, unanimous, a veto and the requester excluded", func(p *arbiter.Policy) {
			p.Review = &arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: "unanimous", Veto: []string{"reject"}, ExcludeRequester: true, Tiebreak: arbiter.TiebreakAdmin}
		}, ""},
		{"too many reviews", func(p *arbiter.Policy) { p.Review = &arbiter.ReviewRequirement{ReviewsRequired: 6} }, "reviews_required"},
		{"a quorum of half", func(p *arbiter.Policy) {
			p.Review = &arbiter.ReviewRequirement{ReviewsRequired: 4, Consensus: "quorum", Quorum: 2}
		}, "quorum"},
		{"any with several reviews", func(p *arbiter.Policy) { p.Review = &arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: "any"} }, "consensus"},
		{"a tiebreak for one review", func(p *arbiter.Policy) {
			p.Review = &arbiter.ReviewRequirement{ReviewsRequired: 1, Tiebreak: "role:admin"}
		}, "tiebreak"},
		{"a requester named", func(p *arbiter.Policy) {
			p.Review = &arbiter.ReviewRequirement{ReviewsRequired: 2, RequestedBy: "a@example.com"}
		}, "requested_by"},
	} {
		p := valid()
		tc.change(&p)
		err := p.Validate()
		if tc.field == "" && err != nil {
			t.Errorf("%s: %v, want valid", tc.name, err)
		} else if tc.field != "" && (arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorField(err) != tc.field) {
			t.Errorf("%s: %v, want EINVALID naming %s", tc.name, err, tc.field)
		}
	}
}

func TestParsePolicy_NotifyAndReview(t *testing.T) {
	for _, tc := range []struct {
		body   string
		notify string // the targets, joined by ","
		review string // ReviewRequirement.Describe, "" for none
		field  string
	}{
		{`{}`, "", "", ""},
		{`{"notify":null,"reviews_required":null,"veto":null}`, "", "", ""},
		{`{"notify":["slack:#refunds","slack:#refunds"]}`, "slack:#refunds", "", ""},
		{`{"notify":[]}`, "", "", "notify"},
		{`{"notify":"slack:#refunds"}`, "", "", "notify"},
		{`{"notify":["#refunds"]}`, "", "", "notify"},
		{`{"reviews_required":2}`, "", "2 reviews, unanimous", ""},
		{`{"reviews_required":3,"consensus":"quorum","quorum":2,"veto":["reject"],"exclude_requester":true,"tiebreak":"role:admin"}`,
			"", "3 reviews, quorum 2, veto reject, requester excluded, tiebreak role:admin", ""},
		{`{"reviews_required":1}`, "", "", ""},
		{`{"reviews_required":1.5}`, "", "", "reviews_required"},
		{`{"consensus":"quorum"}`, "", "", "quorum"},
		{`{"reviews_required":2,"veto":["reject","reject"]}`, "", "", "veto"},
		{`{"tiebreak":"role:admin"}`, "", "", "tiebreak"},
		{`{"requested_by":"a@example.com"}`, "", "", ""}, // unknown: refused by the decoder
	} {
		p, err := arbiter.ParsePolicy("refund", []byte(tc.body))
		review := ""
		if p.Review != nil {
			review = p.Review.Describe()
		}
		switch {
		case strings.Contains(tc.body, "requested_by"):
			if arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), "requested_by") {
				t.Errorf("%s: %v, want EINVALID naming requested_by", tc.body, err)
			}
		case tc.field != "" && (arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorField(err) != tc.field):
			t.Errorf("%s: %v, want EINVALID naming %s", tc.body, err, tc.field)
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.field == "" && (strings.Join(p.Notify, ",") != tc.notify || review != tc.review):
			t.Errorf("%s: notify %q, review %q; want %q, %q", tc.body, p.Notify, review, tc.notify, tc.review)
		}
	}
}

// TestPolicy_Apply_NotifyAndReview: a create that names no notify targets
// or review fields takes the policy's; one that names them keeps its own;
// requested_by stays the create's; a requirement the create cannot take is
// refused, naming the policy; a gold task takes none (one reviewer answers
// it).
func TestPolicy_Apply_NotifyAndReview(t *testing.T) {
	policy := &arbiter.Policy{TaskType: "refund", Notify: []string{"slack:#refunds"},
		Review: &arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: "unanimous", Veto: []string{"reject"}}}
	const base = `{"prompt":"p","allowed_verdicts":["approve","reject"]`
	for _, tc := range []struct {
		name   string
		body   string
		notify string
		review string // Describe plus " by <requested_by>", "" for none
		field  string
	}{
		{"a create without them takes the policy's", base + `}`, "slack:#refunds", "2 reviews, unanimous, veto reject", ""},
		{"its own notify wins", base + `,"notify":["slack:#vip"]}`, "slack:#vip", "2 reviews, unanimous, veto reject", ""},
		{"its own requirement wins", base + `,"reviews_required":3,"consensus":"quorum","quorum":2}`, "slack:#refunds", "3 reviews, quorum 2", ""},
		{"one review asked on the create wins", base + `,"reviews_required":1}`, "slack:#refunds", "", ""},
		{"requested_by alone keeps the policy's requirement", base + `,"requested_by":"Ann@example.com"}`,
			"slack:#refunds", "2 reviews, unanimous, veto reject by ann@example.com", ""},
		{"a veto the create does not allow", `{"prompt":"p","allowed_verdicts":["yes","no"]}`, "", "", "veto"},
		{"a gold task is one reviewer's to answer", base + `,"gold_verdict":"reject"}`, "slack:#refunds", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := arbiter.ParseTaskCreate([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			out, err := policy.Apply(in)
			if tc.field != "" {
				if arbiter.ErrorField(err) != tc.field || !strings.Contains(arbiter.ErrorMessage(err), `"refund"`) {
					t.Errorf("got %v, want EINVALID naming %s and the policy", err, tc.field)
				}
				return
			} else if err != nil {
				t.Fatal(err)
			}
			review := ""
			if out.Review != nil {
				review = out.Review.Describe()
				if out.Review.RequestedBy != "" {
					review += " by " + out.Review.RequestedBy
				}
			}
			if got := strings.Join(out.Notify, ","); got != tc.notify || review != tc.review {
				t.Errorf("notify %q, review %q; want %q, %q", got, review, tc.notify, tc.review)
			}
		})
	}
	t.Run("a policy that excludes the requester needs one named", func(t *testing.T) {
		excluding := &arbiter.Policy{TaskType: "refund", Review: &arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: "unanimous", ExcludeRequester: true}}
		in, _ := arbiter.ParseTaskCreate([]byte(base + `}`))
		if _, err := excluding.Apply(in); arbiter.ErrorField(err) != "requested_by" {
			t.Errorf("got %v, want EINVALID naming requested_by", err)
		}
		in, _ = arbiter.ParseTaskCreate([]byte(base + `,"requested_by":"ann@example.com"}`))
		if out, err := excluding.Apply(in); err != nil || out.Review == nil || !out.Review.ExcludeRequester || out.Review.RequestedBy != "ann@example.com" {
			t.Errorf("with requested_by: %+v, %v", out.Review, err)
		}
	})
	t.Run("the policy's requirement is not shared", func(t *testing.T) {
		in, _ := arbiter.ParseTaskCreate([]byte(base + `}`))
		out, _ := policy.Apply(in)
		out.Review.Veto[0], out.Notify[0] = "approve", "slack:#x"
		if policy.Review.Veto[0] != "reject" || policy.Notify[0] != "slack:#refunds" {
			t.Error("a create's changes reached the policy")
		}
	})
}

func TestPolicy_Apply(t *testing.T) {
	policy := &arbiter.Policy{TaskType: "refund", ConfidenceThreshold: ref(0.95), DeadlineSeconds: ref(600),
		AuditRate: ref(0.2), OnExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"}}
	parse := func(body string) arbiter.TaskCreate {
		t.Helper()
		in, err := arbiter.ParseTaskCreate([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return in
	}

	t.Run("a create without the fields takes the policy's", func(t *testing.T) {
		got, err := policy.Apply(parse(`{"prompt":"p","allowed_verdicts":["approve","reject"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if got.ConfidenceThreshold != 0.95 || got.DeadlineSeconds != 600 || got.AuditRate == nil || *got.AuditRate != 0.2 ||
			got.OnExpiry.Outcome != "verdict:reject" {
			t.Errorf("got %+v, want the policy's values", got)
		}
	})
	t.Run("fields given on the create override", func(t *testing.T) {
		got, err := policy.Apply(parse(`{"prompt":"p","allowed_verdicts":["approve","reject"],"confidence_threshold":0.8,
			"deadline_seconds":60,"audit_rate":0,"on_expiry":"expire"}`))
		if err != nil {
			t.Fatal(err)
		}
		if got.ConfidenceThreshold != 0.8 || got.DeadlineSeconds != 60 || got.AuditRate == nil || *got.AuditRate != 0 ||
			!got.OnExpiry.IsExpire() {
			t.Errorf("got %+v, want the create's values", got)
		}
	})
	t.Run("without a policy the defaults stay", func(t *testing.T) {
		var none *arbiter.Policy
		got, err := none.Apply(parse(`{"prompt":"p","allowed_verdicts":["approve"]}`))
		if err != nil || got.ConfidenceThreshold != arbiter.DefaultConfidenceThreshold || got.DeadlineSeconds != 0 || !got.OnExpiry.IsExpire() {
			t.Errorf("got %+v, %v, want the defaults", got, err)
		}
	})
	t.Run("a create in code takes nothing from the policy", func(t *testing.T) {
		in := arbiter.TaskCreate{Prompt: "p", AllowedVerdicts: []string{"reject"}, ConfidenceThreshold: 0.5}
		got, err := policy.Apply(in)
		if err != nil || got.ConfidenceThreshold != 0.5 || got.DeadlineSeconds != 0 || !got.OnExpiry.IsExpire() {
			t.Errorf("got %+v, %v", got, err)
		}
	})
	t.Run("the policy's verdict must be allowed", func(t *testing.T) {
		_, err := policy.Apply(parse(`{"prompt":"p","allowed_verdicts":["yes","no"]}`))
		if arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorField(err) != "on_expiry" ||
			!strings.Contains(arbiter.ErrorMessage(err), `"refund"`) || !strings.Contains(arbiter.ErrorMessage(err), `"reject"`) {
			t.Errorf("got %v, want EINVALID naming the policy and its verdict", err)
		}
	})
	t.Run("an outcome needs a deadline", func(t *testing.T) {
		var none *arbiter.Policy
		_, err := none.Apply(parse(`{"prompt":"p","allowed_verdicts":["approve"],"on_expiry":"verdict:approve"}`))
		if arbiter.ErrorField(err) != "on_expiry" {
			t.Errorf("got %v, want EINVALID naming on_expiry", err)
		}
	})
}

func TestParseTaskCreate_OnExpiry(t *testing.T) {
	const base = `{"prompt":"p","allowed_verdicts":["approve","reject"],"deadline_seconds":60,`
	for _, tc := range []struct {
		body  string
		want  arbiter.OnExpiry
		field string
	}{
		{`"on_expiry":"expire"}`, arbiter.OnExpiry{}, ""},
		{`"on_expiry":"verdict:approve"}`, arbiter.OnExpiry{Outcome: "verdict:approve"}, ""},
		{`"on_expiry":"agent_verdict","agent_floor":0.9,"on_expiry_fallback":"verdict:reject"}`,
			arbiter.OnExpiry{Outcome: "agent_verdict", AgentFloor: ref(0.9), Fallback: "verdict:reject"}, ""},
		{`"on_expiry":"verdict:maybe"}`, arbiter.OnExpiry{}, "on_expiry"},
		{`"on_expiry":"agent_verdict","agent_floor":0.9,"on_expiry_fallback":"verdict:maybe"}`, arbiter.OnExpiry{}, "on_expiry_fallback"},
		{`"agent_floor":0.9}`, arbiter.OnExpiry{}, "on_expiry"},
		{`"on_expiry":"agent_verdict"}`, arbiter.OnExpiry{}, "agent_floor"},
		{`"on_expiry":7}`, arbiter.OnExpiry{}, "on_expiry"},
		{`"on_expiry":null}`, arbiter.OnExpiry{}, "on_expiry"},
	} {
		in, err := arbiter.ParseTaskCreate([]byte(base + tc.body))
		switch {
		case tc.field != "" && arbiter.ErrorField(err) != tc.field:
			t.Errorf("%s: %v, want EINVALID naming %s", tc.body, err, tc.field)
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.field == "" && (in.OnExpiry.Outcome != tc.want.Outcome || in.OnExpiry.Fallback != tc.want.Fallback ||
			(in.OnExpiry.AgentFloor == nil) != (tc.want.AgentFloor == nil)):
			t.Errorf("%s: %+v, want %+v", tc.body, in.OnExpiry, tc.want)
		case tc.field == "" && in.Omitted&arbiter.FieldOnExpiry != 0:
			t.Errorf("%s: on_expiry counted as left out", tc.body)
		}
	}
	in, _ := arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"]}`))
	if in.Omitted != arbiter.AllPolicyFields {
		t.Errorf("a create without the policy's fields: omitted %b, want %b", in.Omitted, arbiter.AllPolicyFields)
	}
}

// The fingerprint of a create that leaves on_expiry out is the one it had
// before on_expiry existed, so stored idempotency keys still match.
func TestTaskCreate_FingerprintWithoutOnExpiry(t *testing.T) {
	in, _ := arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"]}`))
	with := in
	with.OnExpiry = arbiter.OnExpiry{Outcome: "verdict:a"}
	if in.Fingerprint() == with.Fingerprint() {
		t.Error("on_expiry does not take part in the fingerprint")
	}
	omitted := in
	omitted.Omitted = 0
	if in.Fingerprint() != omitted.Fingerprint() {
		t.Error("the omitted fields take part in the fingerprint")
	}
}

func TestDeadlinePassedError(t *testing.T) {
	plain := arbiter.DeadlinePassedError(&arbiter.Task{})
	outcome := arbiter.DeadlinePassedError(&arbiter.Task{OnExpiry: arbiter.OnExpiry{Outcome: "verdict:approve"}})
	if plain.Code != arbiter.ECONFLICT || !strings.Contains(plain.Message, "expired") {
		t.Errorf("plain: %v", plain)
	}
	if outcome.Code != arbiter.ECONFLICT || !strings.Contains(outcome.Message, "approve") || strings.Contains(outcome.Message, "expired") {
		t.Errorf("with an outcome: %v", outcome)
	}
	decided := &arbiter.Task{FinalTier: ref(arbiter.TierFallback), FinalVerdict: ref("approve")}
	if !strings.Contains(decided.DecidedBy(), "on-expiry outcome (approve)") {
		t.Errorf("DecidedBy = %q", decided.DecidedBy())
	}
}

// TestReviewRequirement_ForPolicy: a policy's requirement takes the
// create's defaults (unanimous for several reviews) and refuses what a
// create would, and a requester, which is each create's own.
func TestReviewRequirement_ForPolicy(t *testing.T) {
	for _, tc := range []struct {
		in    arbiter.ReviewRequirement
		want  string // Describe
		field string
	}{
		{arbiter.ReviewRequirement{ReviewsRequired: 2}, "2 reviews, unanimous", ""},
		{arbiter.ReviewRequirement{}, "1 review, any", ""},
		{arbiter.ReviewRequirement{ReviewsRequired: 3, Consensus: "quorum", Quorum: 2, ExcludeRequester: true},
			"3 reviews, quorum 2, requester excluded", ""},
		{arbiter.ReviewRequirement{ReviewsRequired: 2, RequestedBy: "a@example.com"}, "", "requested_by"},
		{arbiter.ReviewRequirement{ReviewsRequired: 3, Consensus: "quorum"}, "", "quorum"},
		{arbiter.ReviewRequirement{ReviewsRequired: 2, Veto: []string{"no", "no"}}, "", "veto"},
	} {
		got, err := tc.in.ForPolicy()
		if tc.field != "" && arbiter.ErrorField(err) != tc.field {
			t.Errorf("%+v: %v, want EINVALID naming %s", tc.in, err, tc.field)
		} else if tc.field == "" && (err != nil || got.Describe() != tc.want) {
			t.Errorf("%+v: %q, %v; want %q", tc.in, got.Describe(), err, tc.want)
		}
	}
}

// TestParsePolicy_Target reads the error rate a policy holds the agent to:
// its confidence defaults to 95%, a confidence alone or out of range is
// refused naming the field, and the answer writes both back.
func TestParsePolicy_Target(t *testing.T) {
	p, err := arbiter.ParsePolicy("refund", []byte(`{"target_error_rate":0.15,"target_confidence":0.9}`))
	if err != nil || p.Target == nil || *p.Target != (arbiter.ErrorTarget{ErrorRate: 0.15, Confidence: 0.9}) {
		t.Fatalf("got %+v, %v", p.Target, err)
	}
	out, _ := json.Marshal(p)
	if !strings.Contains(string(out), `"target_error_rate":0.15,"target_confidence":0.9`) {
		t.Errorf("the answer: %s", out)
	}
	if p, err := arbiter.ParsePolicy("refund", []byte(`{"target_error_rate":0.02}`)); err != nil || p.Target.Confidence != 0.95 {
		t.Errorf("without a confidence: %+v, %v", p.Target, err)
	}
	if p, err := arbiter.ParsePolicy("refund", []byte(`{}`)); err != nil || p.Target != nil {
		t.Errorf("without a target: %+v, %v", p.Target, err)
	}
	if out, _ := json.Marshal(arbiter.Policy{TaskType: "x"}); !strings.Contains(string(out), `"target_error_rate":null,"target_confidence":null`) {
		t.Errorf("a policy without a target: %s", out)
	}
	for body, field := range map[string]string{
		`{"target_confidence":0.9}`:                          "target_confidence",
		`{"target_error_rate":0}`:                            "target_error_rate",
		`{"target_error_rate":1}`:                            "target_error_rate",
		`{"target_error_rate":"5%"}`:                         "target_error_rate",
		`{"target_error_rate":0.05,"target_confidence":0.4}`: "target_confidence",
		`{"target_error_rate":0.05,"target_confidence":1}`:   "target_confidence",
	} {
		_, err := arbiter.ParsePolicy("refund", []byte(body))
		var e *arbiter.Error
		if arbiter.ErrorCode(err) != arbiter.EINVALID || !errors.As(err, &e) || e.Field != field {
			t.Errorf("%s: %v, want EINVALID naming %s", body, err, field)
		}
	}
}
