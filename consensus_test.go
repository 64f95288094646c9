package arbiter

import (
	"errors"
	"strings"
	"testing"
)

func vote(person, verdict string) Vote {
	return Vote{PersonID: person, Email: person + "@example.com", Verdict: verdict, Role: RoleReviewer}
}

func TestReviewRequirement_Decide(t *testing.T) {
	single := ReviewRequirement{ReviewsRequired: 1, Consensus: ConsensusAny}
	two := ReviewRequirement{ReviewsRequired: 2, Consensus: ConsensusUnanimous}
	twoAdmin := ReviewRequirement{ReviewsRequired: 2, Consensus: ConsensusUnanimous, Tiebreak: TiebreakAdmin}
	twoOfThree := ReviewRequirement{ReviewsRequired: 3, Consensus: ConsensusQuorum, Quorum: 2}
	threeOfFive := ReviewRequirement{ReviewsRequired: 5, Consensus: ConsensusQuorum, Quorum: 3, Tiebreak: TiebreakAdmin}
	vetoReject := ReviewRequirement{ReviewsRequired: 2, Consensus: ConsensusUnanimous, Veto: []string{"reject"}}
	excluding := ReviewRequirement{ReviewsRequired: 2, Consensus: ConsensusUnanimous, ExcludeRequester: true, RequestedBy: "ann@example.com"}
	admin := Vote{PersonID: "zed", Email: "zed@example.com", Verdict: "reject", Role: RoleAdmin}
	owner := Vote{PersonID: "olga", Email: "olga@example.com", Verdict: "approve", Role: RoleOwner}
	removed := Vote{PersonID: "gone", Email: "gone@example.com", Verdict: "approve"}

	for _, tc := range []struct {
		name  string
		req   ReviewRequirement
		votes []Vote
		want  ConsensusOutcome
	}{
		{"AnyWithoutVotesIsPending", single, nil, ConsensusOutcome{State: VotesPending, Open: 1}},
		{"AnyDecidesOnTheFirstVote", single, []Vote{vote("ann", "reject")}, ConsensusOutcome{State: VotesDecided, Verdict: "reject", Counted: 1}},
		{"UnanimousWaitsForTheSecondVote", two, []Vote{vote("ann", "approve")}, ConsensusOutcome{State: VotesPending, Counted: 1, Open: 1}},
		{"UnanimousDecidesWhenAllAgree", two, []Vote{vote("ann", "approve"), vote("bob", "approve")}, ConsensusOutcome{State: VotesDecided, Verdict: "approve", Counted: 2}},
		{"UnanimousSplitWithoutTiebreakWaits", two, []Vote{vote("ann", "approve"), vote("bob", "reject")}, ConsensusOutcome{State: VotesTiebreak, Counted: 2}},
		{"UnanimousSplitWithAdminTiebreakOpensOneSlot", twoAdmin, []Vote{vote("ann", "approve"), vote("bob", "reject")}, ConsensusOutcome{State: VotesTiebreak, Counted: 2, Open: 1}},
		{"AReviewerCannotBreakTheTie", twoAdmin, []Vote{vote("ann", "approve"), vote("bob", "reject"), vote("cat", "approve")}, ConsensusOutcome{State: VotesTiebreak, Counted: 2, Open: 1}},
		{"AnAdminBreaksTheTie", twoAdmin, []Vote{vote("ann", "approve"), vote("bob", "reject"), admin}, ConsensusOutcome{State: VotesDecided, Verdict: "reject", Counted: 3}},
		{"AnOwnerBreaksTheTie", twoAdmin, []Vote{vote("ann", "approve"), vote("bob", "reject"), owner}, ConsensusOutcome{State: VotesDecided, Verdict: "approve", Counted: 3}},
		{"WithoutTiebreakNobodyBreaksTheTie", two, []Vote{vote("ann", "approve"), vote("bob", "reject"), admin}, ConsensusOutcome{State: VotesTiebreak, Counted: 2}},
		{"QuorumDecidesOnTwoOfThree", twoOfThree, []Vote{vote("ann", "approve"), vote("bob", "approve")}, ConsensusOutcome{State: VotesDecided, Verdict: "approve", Counted: 2}},
		{"QuorumWaitsAfterASplitThatMayStillReachIt", twoOfThree, []Vote{vote("ann", "approve"), vote("bob", "reject")}, ConsensusOutcome{State: VotesPending, Counted: 2, Open: 1}},
		{"QuorumTheThirdVoteDecides", twoOfThree, []Vote{vote("ann", "approve"), vote("bob", "reject"), vote("cat", "reject")}, ConsensusOutcome{State: VotesDecided, Verdict: "reject", Counted: 3}},
		{"QuorumThreeWaysCannotReachIt", twoOfThree, []Vote{vote("ann", "approve"), vote("bob", "reject"), vote("cat", "escalate")}, ConsensusOutcome{State: VotesTiebreak, Counted: 3}},
		{"QuorumGoesToTiebreakBeforeTheLastVotes", threeOfFive, []Vote{vote("ann", "a"), vote("bob", "b"), vote("cat", "c"), vote("dan", "d")}, ConsensusOutcome{State: VotesTiebreak, Counted: 4, Open: 1}},
		{"QuorumStillReachableWithTwoVotesLeft", threeOfFive, []Vote{vote("ann", "a"), vote("bob", "b"), vote("cat", "c")}, ConsensusOutcome{State: VotesPending, Counted: 3, Open: 2}},
		{"AVetoDecidesAtOnce", vetoReject, []Vote{vote("ann", "reject")}, ConsensusOutcome{State: VotesDecided, Verdict: "reject", Counted: 1}},
		{"AVetoAfterAnApprovalDecides", vetoReject, []Vote{vote("ann", "approve"), vote("bob", "reject")}, ConsensusOutcome{State: VotesDecided, Verdict: "reject", Counted: 2}},
		{"AnotherVerdictIsNoVeto", vetoReject, []Vote{vote("ann", "approve")}, ConsensusOutcome{State: VotesPending, Counted: 1, Open: 1}},
		{"TheRequesterVoteDoesNotCount", excluding, []Vote{vote("ann", "approve"), vote("bob", "approve")}, ConsensusOutcome{State: VotesPending, Counted: 1, Open: 1}},
		{"TheRequesterMatchesWhateverTheCase", excluding, []Vote{{PersonID: "ann", Email: "Ann@Example.com", Verdict: "approve"}}, ConsensusOutcome{State: VotesPending, Open: 2}},
		{"OthersDecideWithoutTheRequester", excluding, []Vote{vote("bob", "approve"), vote("cat", "approve")}, ConsensusOutcome{State: VotesDecided, Verdict: "approve", Counted: 2}},
		{"ARemovedVotersVoteStillCounts", two, []Vote{removed, vote("bob", "approve")}, ConsensusOutcome{State: VotesDecided, Verdict: "approve", Counted: 2}},
		{"ARemovedVoterCannotBreakATie", twoAdmin, []Vote{vote("ann", "approve"), vote("bob", "reject"), removed}, ConsensusOutcome{State: VotesTiebreak, Counted: 2, Open: 1}},
		{"ASecondVoteOfOnePersonIsIgnored", two, []Vote{vote("ann", "approve"), vote("ann", "approve")}, ConsensusOutcome{State: VotesPending, Counted: 1, Open: 1}},
		{"VotesAfterTheDecisionAreIgnored", two, []Vote{vote("ann", "approve"), vote("bob", "approve"), vote("cat", "reject")}, ConsensusOutcome{State: VotesDecided, Verdict: "approve", Counted: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.req.Decide(tc.votes)
			if got != tc.want {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReviewRequirement_CheckVote(t *testing.T) {
	twoAdmin := ReviewRequirement{ReviewsRequired: 2, Consensus: ConsensusUnanimous, Tiebreak: TiebreakAdmin,
		ExcludeRequester: true, RequestedBy: "req@example.com"}
	split := []Vote{vote("ann", "approve"), vote("bob", "reject")}
	for _, tc := range []struct {
		name  string
		votes []Vote
		v     Vote
		ok    bool
	}{
		{"AFirstVoteIsTaken", nil, vote("ann", "approve"), true},
		{"TheRequesterIsRefused", nil, vote("req", "approve"), false},
		{"ASecondVoteOfOnePersonIsRefused", []Vote{vote("ann", "approve")}, vote("ann", "reject"), false},
		{"AVoteOnADecidedTaskIsRefused", []Vote{vote("ann", "approve"), vote("bob", "approve")}, vote("cat", "approve"), false},
		{"AReviewerCannotBreakATie", split, vote("cat", "approve"), false},
		{"AnAdminBreaksATie", split, Vote{PersonID: "zed", Email: "zed@example.com", Verdict: "approve", Role: RoleAdmin}, true},
		{"AnAdminWhoVotedCannotBreakTheirTie", []Vote{vote("ann", "approve"), {PersonID: "zed", Email: "zed@example.com", Verdict: "reject", Role: RoleAdmin}},
			Vote{PersonID: "zed", Email: "zed@example.com", Verdict: "approve", Role: RoleAdmin}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := twoAdmin.CheckVote(tc.votes, tc.v)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckVote = %v, want ok %v", err, tc.ok)
			}
			if err != nil && ErrorCode(err) != ECONFLICT {
				t.Errorf("code = %q, want %q", ErrorCode(err), ECONFLICT)
			}
		})
	}
}

func TestParseTaskCreate_ReviewRequirement(t *testing.T) {
	const base = `"prompt":"refund?","allowed_verdicts":["approve","reject"]`
	for _, tc := range []struct {
		name  string
		extra string
		want  *ReviewRequirement
		field string // the field a refusal names
	}{
		{"OmittedIsTodaysSingleReview", ``, nil, ""},
		{"OneReviewAnyIsTodays", `,"reviews_required":1,"consensus":"any"`, nil, ""},
		{"TwoDefaultToUnanimous", `,"reviews_required":2`, &ReviewRequirement{ReviewsRequired: 2, Consensus: ConsensusUnanimous}, ""},
		{"QuorumTwoOfThree", `,"reviews_required":3,"consensus":"quorum","quorum":2`, &ReviewRequirement{ReviewsRequired: 3, Consensus: ConsensusQuorum, Quorum: 2}, ""},
		{"EverythingAsked", `,"reviews_required":2,"veto":["reject"],"requested_by":"Ann@Example.com","exclude_requester":true,"tiebreak":"role:admin"`,
			&ReviewRequirement{ReviewsRequired: 2, Consensus: ConsensusUnanimous, Veto: []string{"reject"}, ExcludeRequester: true, RequestedBy: "ann@example.com", Tiebreak: TiebreakAdmin}, ""},
		{"RequestedByAloneIsKept", `,"requested_by":"ann@example.com"`, &ReviewRequirement{ReviewsRequired: 1, Consensus: ConsensusAny, RequestedBy: "ann@example.com"}, ""},
		{"ZeroReviews", `,"reviews_required":0`, nil, "reviews_required"},
		{"SixReviews", `,"reviews_required":6`, nil, "reviews_required"},
		{"FractionalReviews", `,"reviews_required":1.5`, nil, "reviews_required"},
		{"ReviewsAsString", `,"reviews_required":"2"`, nil, "reviews_required"},
		{"NullReviews", `,"reviews_required":null`, nil, "reviews_required"},
		{"UnknownConsensus", `,"reviews_required":2,"consensus":"majority"`, nil, "consensus"},
		{"AnyWithTwoReviews", `,"reviews_required":2,"consensus":"any"`, nil, "consensus"},
		{"QuorumWithoutM", `,"reviews_required":3,"consensus":"quorum"`, nil, "quorum"},
		{"QuorumOfHalf", `,"reviews_required":4,"consensus":"quorum","quorum":2`, nil, "quorum"},
		{"QuorumAboveReviews", `,"reviews_required":3,"consensus":"quorum","quorum":4`, nil, "quorum"},
		{"QuorumWithoutQuorumConsensus", `,"reviews_required":3,"quorum":2`, nil, "quorum"},
		{"VetoOutsideTheVerdicts", `,"reviews_required":2,"veto":["maybe"]`, nil, "veto"},
		{"VetoTwice", `,"reviews_required":2,"veto":["reject","reject"]`, nil, "veto"},
		{"ExcludeWithoutRequester", `,"reviews_required":2,"exclude_requester":true`, nil, "exclude_requester"},
		{"RequesterNotAnEmail", `,"requested_by":"Ann <ann@example.com>"`, nil, "requested_by"},
		{"UnknownTiebreak", `,"reviews_required":2,"tiebreak":"role:owner"`, nil, "tiebreak"},
		{"TiebreakOnOneReview", `,"tiebreak":"role:admin"`, nil, "tiebreak"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := ParseTaskCreate([]byte(`{` + base + tc.extra + `}`))
			if tc.field != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != EINVALID || e.Field != tc.field {
					t.Fatalf("err = %v, want EINVALID on %s", err, tc.field)
				}
				if !strings.Contains(e.Message, tc.field) {
					t.Errorf("message %q does not name %s", e.Message, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == nil && in.Review != nil:
				t.Errorf("Review = %+v, want nil", *in.Review)
			case tc.want != nil && (in.Review == nil || string(MarshalRequirement(*in.Review)) != string(MarshalRequirement(*tc.want))):
				t.Errorf("Review = %+v, want %+v", in.Review, *tc.want)
			}
		})
	}
}

func TestMarshalRequirement_RoundTrips(t *testing.T) {
	if b := MarshalRequirement(ReviewRequirement{ReviewsRequired: 1, Consensus: ConsensusAny}); b != nil {
		t.Errorf("default = %s, want nil", b)
	}
	r := ReviewRequirement{ReviewsRequired: 3, Consensus: ConsensusQuorum, Quorum: 2, Veto: []string{"reject"}, Tiebreak: TiebreakAdmin}
	got, err := UnmarshalRequirement(MarshalRequirement(r))
	if err != nil || string(MarshalRequirement(got)) != string(MarshalRequirement(r)) {
		t.Errorf("round trip = %+v, %v", got, err)
	}
	if got, err := UnmarshalRequirement(nil); err != nil || got.ReviewsRequired != 1 || got.Consensus != ConsensusAny {
		t.Errorf("empty = %+v, %v", got, err)
	}
}

func TestVoterWaitOf(t *testing.T) {
	voted := func(person, verdict string) Attempt {
		email := person + "@example.com"
		return Attempt{Tier: TierHuman, Verdict: &verdict, Reviewer: &email, PersonID: person}
	}
	agent := func(verdict string) Attempt {
		c := 0.4
		return Attempt{Tier: TierAgent, Verdict: &verdict, Confidence: &c}
	}
	task := func(req ReviewRequirement, status string, attempts ...Attempt) *Task {
		return &Task{Status: status, Review: &req, Attempts: attempts}
	}
	three := ReviewRequirement{ReviewsRequired: 3, Consensus: ConsensusUnanimous}
	two := ReviewRequirement{ReviewsRequired: 2, Consensus: ConsensusUnanimous}
	twoAdmin := ReviewRequirement{ReviewsRequired: 2, Consensus: ConsensusUnanimous, Tiebreak: TiebreakAdmin}
	twoOfThree := ReviewRequirement{ReviewsRequired: 3, Consensus: ConsensusQuorum, Quorum: 2}
	single := ReviewRequirement{ReviewsRequired: 1, Consensus: ConsensusAny}

	for _, tc := range []struct {
		name   string
		task   *Task
		person string
		want   VoterWait
		ok     bool
	}{
		{"FirstOfThreeWaitsForTwoMore", task(three, StatusHumanNeeded, agent("approve"), voted("ann", "approve")), "ann",
			VoterWait{Verdict: "approve", State: VotesPending, More: 2}, true},
		{"SecondOfThreeWaitsForOneMore", task(three, StatusHumanNeeded, voted("ann", "approve"), voted("bob", "approve")), "bob",
			VoterWait{Verdict: "approve", State: VotesPending, More: 1}, true},
		{"AQuorumWaitsForTheRestOfItsVotes", task(twoOfThree, StatusHumanNeeded, voted("ann", "reject")), "ann",
			VoterWait{Verdict: "reject", State: VotesPending, More: 2}, true},
		{"ASplitWithoutTiebreakWaitsForTheDeadline", task(two, StatusHumanNeeded, voted("ann", "approve"), voted("bob", "reject")), "ann",
			VoterWait{Verdict: "approve", State: VotesTiebreak}, true},
		{"ASplitWithATiebreakerWaitsForAnAdmin", task(twoAdmin, StatusHumanNeeded, voted("ann", "approve"), voted("bob", "reject")), "bob",
			VoterWait{Verdict: "reject", State: VotesTiebreak, Tiebreaker: true}, true},
		{"SomeoneWhoDidNotVoteIsOfferedTheVerdicts", task(three, StatusHumanNeeded, voted("ann", "approve")), "bob", VoterWait{}, false},
		{"NobodyIsNotAVoter", task(three, StatusHumanNeeded, voted("ann", "approve")), "", VoterWait{}, false},
		{"ADecidedTaskWaitsForNothing", task(two, StatusCompleted, voted("ann", "approve"), voted("bob", "approve")), "ann", VoterWait{}, false},
		{"ASingleReviewIsNoVote", task(single, StatusHumanNeeded, voted("ann", "approve")), "ann", VoterWait{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := VoterWaitOf(tc.task, tc.person)
			if ok != tc.ok || got != tc.want {
				t.Errorf("VoterWaitOf = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
