package arbiter

import (
	"errors"
	"testing"
)

func TestParseTaskCreate_GoldVerdict(t *testing.T) {
	const base = `"prompt":"refund?","allowed_verdicts":["approve","reject"]`
	for _, tc := range []struct {
		name    string
		extra   string
		want    string
		refused bool
	}{
		{"OmittedIsNoGold", ``, "", false},
		{"AnAllowedVerdict", `,"gold_verdict":"reject"`, "reject", false},
		{"NotAnAllowedVerdict", `,"gold_verdict":"maybe"`, "", true},
		{"CaseMatters", `,"gold_verdict":"Reject"`, "", true},
		{"Empty", `,"gold_verdict":""`, "", true},
		{"Null", `,"gold_verdict":null`, "", true},
		{"NotAString", `,"gold_verdict":1`, "", true},
		{"WithSeveralReviews", `,"gold_verdict":"reject","reviews_required":2`, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := ParseTaskCreate([]byte(`{` + base + tc.extra + `}`))
			if tc.refused {
				var e *Error
				if !errors.As(err, &e) || e.Code != EINVALID || e.Field != "gold_verdict" {
					t.Fatalf("err = %v, want EINVALID on gold_verdict", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if in.GoldVerdict != tc.want {
				t.Errorf("GoldVerdict = %q, want %q", in.GoldVerdict, tc.want)
			}
		})
	}
	// In a batch, the item is refused on its own.
	items, err := ParseTaskBatch([]byte(`{"tasks":[{` + base + `,"gold_verdict":"maybe"},{` + base + `,"gold_verdict":"approve"}]}`))
	if err != nil || len(items) != 2 || ErrorCode(items[0].Err) != EINVALID || items[1].Err != nil || items[1].Create.GoldVerdict != "approve" {
		t.Errorf("batch = %+v, %v; want the first refused, the second gold", items, err)
	}
	// The gold verdict takes part in the fingerprint: a key reused with
	// another gold verdict is a mismatch.
	a, _ := ParseTaskCreate([]byte(`{` + base + `,"gold_verdict":"approve"}`))
	b, _ := ParseTaskCreate([]byte(`{` + base + `,"gold_verdict":"reject"}`))
	plain, _ := ParseTaskCreate([]byte(`{` + base + `}`))
	if a.Fingerprint() == b.Fingerprint() || a.Fingerprint() == plain.Fingerprint() {
		t.Error("fingerprints do not tell gold verdicts apart")
	}
}

func TestGoldFirst(t *testing.T) {
	for _, tc := range []struct {
		rate, draw float64
		want       bool
	}{
		{0, 0, false}, {0.1, 0.0999, true}, {0.1, 0.1, false}, {0.5, 0.2, true}, {0.5, 0.7, false}, {1, 0.9999, true},
	} {
		if got := GoldFirst(tc.rate, tc.draw); got != tc.want {
			t.Errorf("GoldFirst(%v, %v) = %v, want %v", tc.rate, tc.draw, got, tc.want)
		}
	}
}

func TestParseGoldPercent(t *testing.T) {
	for _, tc := range []struct {
		typed string
		want  float64
		ok    bool
	}{
		{"10", 0.1, true}, {"10%", 0.1, true}, {" 0 ", 0, true}, {"100", 1, true}, {"2.5", 0.025, true},
		{"", 0, false}, {"101", 0, false}, {"-1", 0, false}, {"1e1", 0, false}, {"ten", 0, false},
	} {
		got, err := ParseGoldPercent(tc.typed)
		if tc.ok != (err == nil) || (tc.ok && got != tc.want) {
			t.Errorf("ParseGoldPercent(%q) = %v, %v; want %v (ok %v)", tc.typed, got, err, tc.want, tc.ok)
		}
		if err != nil && ErrorCode(err) != EINVALID {
			t.Errorf("ParseGoldPercent(%q) error %v, want EINVALID", tc.typed, err)
		}
	}
}

func TestAgreementReport_AddGold(t *testing.T) {
	approve, reject := "approve", "reject"
	report := TeamAgreement([]AgreementTask{{TaskID: "t1", Agent: &approve, Consensus: approve,
		Votes: []Vote{{Email: "ann@example.com", Verdict: approve}, {Email: "bob@example.com", Verdict: approve}}}})
	before := report
	before.Reviewers = append([]ReviewerAgreement(nil), report.Reviewers...)
	report.AddGold([]GoldAnswer{
		{TaskID: "g1", Email: "bob@example.com", Verdict: reject, Gold: reject},
		{TaskID: "g2", Email: "bob@example.com", Verdict: approve, Gold: reject},
		{TaskID: "g3", Email: "bob@example.com", Verdict: reject, Gold: reject},
		{TaskID: "g4", Email: "cat@example.com", Verdict: approve, Gold: approve},
	})
	// The team's agreement is as it was: gold answers are not votes.
	if report.Tasks != before.Tasks || report.Pairs != before.Pairs || *report.Raw != *before.Raw {
		t.Errorf("the team's agreement changed: %+v, was %+v", report, before)
	}
	want := []struct {
		email             string
		votes, gold, good int
		accuracy          *float64
	}{
		{"ann@example.com", 1, 0, 0, nil},
		{"bob@example.com", 1, 3, 2, share(2.0 / 3)},
		{"cat@example.com", 0, 1, 1, share(1.0)},
	}
	if len(report.Reviewers) != len(want) {
		t.Fatalf("reviewers = %+v", report.Reviewers)
	}
	for i, w := range want {
		got := report.Reviewers[i]
		if got.Email != w.email || got.Votes != w.votes || got.GoldAnswered != w.gold || got.GoldCorrect != w.good ||
			(got.GoldAccuracy == nil) != (w.accuracy == nil) || (w.accuracy != nil && *got.GoldAccuracy != *w.accuracy) {
			t.Errorf("line %d = %+v, want %+v", i, got, w)
		}
		if got.Email == "cat@example.com" && got.WithConsensus != nil {
			t.Errorf("cat, who voted on nothing, agrees with the consensus %v", *got.WithConsensus)
		}
	}
}

func TestTask_OutcomeForReviewers(t *testing.T) {
	gold, answer, consensus := "reject", "approve", "reject"
	human, agent := TierHuman, TierAgent
	for _, tc := range []struct {
		name string
		task Task
		want *string
	}{
		{"GoldTaskShowsTheReviewersOwnAnswer", Task{FinalVerdict: &gold, FinalTier: &human,
			Attempts: []Attempt{{Tier: TierHuman, Verdict: &answer}}}, &answer},
		{"AgentDecidedShowsTheFinal", Task{FinalVerdict: &gold, FinalTier: &agent,
			Attempts: []Attempt{{Tier: TierAgent, Verdict: &gold}}}, &gold},
		{"ConsensusShowsTheConsensus", Task{FinalVerdict: &consensus, FinalTier: &human, Review: &ReviewRequirement{ReviewsRequired: 2},
			Attempts: []Attempt{{Tier: TierHuman, Verdict: &consensus, PersonID: "p1"}, {Tier: TierHuman, Verdict: &answer, PersonID: "p2"}}}, &consensus},
		{"WaitingShowsNothing", Task{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.task.OutcomeForReviewers()
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("OutcomeForReviewers = %v, want %v", got, tc.want)
			}
		})
	}
}

// share returns a pointer to f.
func share(f float64) *float64 { return &f }

func TestTask_MayBeGold(t *testing.T) {
	agent := []Attempt{{Tier: TierAgent}}
	human := []Attempt{{Tier: TierHuman}}
	for _, tc := range []struct {
		name string
		task Task
		want bool
	}{
		{"Pending", Task{Status: StatusPending}, false},
		{"WithTheAgent", Task{Status: StatusAgentRunning}, false},
		{"HandedOnByTheAgent", Task{Status: StatusHumanNeeded, Attempts: agent}, false},
		{"AnsweredByTheAgent", Task{Status: StatusCompleted, Attempts: agent}, false},
		{"WaitingWithoutTheAgent", Task{Status: StatusHumanNeeded}, true},
		{"DecidedByAPersonAlone", Task{Status: StatusCompleted, Attempts: human}, true},
		{"ExpiredWithoutTheAgent", Task{Status: StatusExpired}, true},
	} {
		if got := tc.task.MayBeGold(); got != tc.want {
			t.Errorf("%s: MayBeGold = %v, want %v", tc.name, got, tc.want)
		}
	}
}
