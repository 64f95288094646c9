package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

func TestTaskCreate_ReviewRequirement(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		task := createTask(t, a, key, `{"prompt":"Release 12,000 EUR?","allowed_verdicts":["approve","reject"],
			"reviews_required":3,"consensus":"quorum","quorum":2,"veto":["reject"],
			"requested_by":"CFO@example.com","exclude_requester":true,"tiebreak":"role:admin"}`)
		want := `map[consensus:quorum exclude_requester:true quorum:2 requested_by:cfo@example.com reviews_required:3 tiebreak:role:admin veto:[reject]]`
		if got := fmt.Sprint(task["review"]); got != want {
			t.Errorf("review = %s, want %s", got, want)
		}
		status, _, b := a.do("GET", "/v1/tasks/"+task["id"].(string), key, "")
		var got map[string]any
		if status != http.StatusOK || json.Unmarshal(b, &got) != nil || fmt.Sprint(got["review"]) != want {
			t.Errorf("get = %d %s, want the review requirement", status, b)
		}
		if plain := createTask(t, a, key, goodTask); plain["review"] != nil {
			t.Errorf("a plain task has review %v", plain["review"])
		}
		// A bad requirement is a 400 naming its field, and stores nothing.
		status, h, b := a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a","b"],"reviews_required":2,"consensus":"quorum","quorum":1}`)
		if msg := wantError(t, status, h, b, 400); msg == "" {
			t.Error("no error sentence")
		}
	})
}

// accountReviewers returns the account of the owner's e-mail and a
// person who accepted a reviewer's invitation for each other address.
func accountReviewers(t *testing.T, a *api, ownerEmail string, emails ...string) (*arbiter.Account, []*arbiter.Person) {
	t.Helper()
	acct, err := a.store.FindOrCreateAccountByEmail(ctx, ownerEmail)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := a.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: ownerEmail, Email: ownerEmail, EmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	var reviewers []*arbiter.Person
	for _, email := range emails {
		_, token, err := a.store.CreateInvitation(ctx, acct.ID, email, arbiter.RoleReviewer, arbiter.Actor{Email: owner.Email, PersonID: owner.ID})
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: email, Email: email, EmailVerified: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.store.AcceptInvitation(ctx, token, p.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		reviewers = append(reviewers, p)
	}
	return acct, reviewers
}

// toVoters claims the account's pending tasks and sends them to people.
func toVoters(t *testing.T, a *api, ids ...string) {
	t.Helper()
	claimed, err := a.store.ClaimTasks(ctx, "w", 10, time.Minute)
	if err != nil || len(claimed) != len(ids) {
		t.Fatalf("claim = %v, %v; want %d", claimed, err, len(ids))
	}
	for _, c := range claimed {
		if err := a.store.FinishAgentAttempt(ctx, "w", c.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTaskGet_OpenVotesAreHidden has ann vote on a task asking two votes:
// while it waits for bob's, no read of an API key (the task, a waiting
// read, the list, an idempotent replay of its create) shows her vote or
// her, only votes_cast 1; once bob votes, both votes are in attempts.
func TestTaskGet_OpenVotesAreHidden(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("owner@example.com")
		acct, rs := accountReviewers(t, a, "owner@example.com", "ann@example.com", "bob@example.com")
		create := `{"prompt":"Release?","allowed_verdicts":["approve","reject"],"reviews_required":2}`
		status, _, b := a.doKeyed("POST", "/v1/tasks", key, create, "release-1")
		if status != http.StatusOK {
			t.Fatalf("create: %d %s", status, b)
		}
		var created struct{ ID string }
		if err := json.Unmarshal(b, &created); err != nil {
			t.Fatal(err)
		}
		id := created.ID
		toVoters(t, a, id)
		if _, err := a.store.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: rs[0].Email, ReviewerID: rs[0].ID}); err != nil {
			t.Fatal(err)
		}
		hidden := func(what string, body []byte) {
			t.Helper()
			if strings.Contains(string(body), "ann@example.com") || strings.Contains(string(body), `"tier":"human"`) ||
				!strings.Contains(string(body), `"votes_cast":1`) {
				t.Errorf("%s while the votes are open: %s; want no vote, no voter, votes_cast 1", what, body)
			}
		}
		for _, path := range []string{"/v1/tasks/" + id, "/v1/tasks/" + id + "?wait=1", "/v1/tasks?status=human_needed"} {
			status, _, b := a.do("GET", path, key, "")
			if status != http.StatusOK {
				t.Fatalf("%s: %d %s", path, status, b)
			}
			hidden(path, b)
		}
		if status, _, b := a.doKeyed("POST", "/v1/tasks", key, create, "release-1"); status != http.StatusOK {
			t.Fatalf("replay: %d %s", status, b)
		} else {
			hidden("a replayed create", b)
		}
		if _, err := a.store.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: rs[1].Email, ReviewerID: rs[1].ID}); err != nil {
			t.Fatal(err)
		}
		status, _, b = a.do("GET", "/v1/tasks/"+id, key, "")
		if status != http.StatusOK || strings.Count(string(b), `"tier":"human"`) != 2 || !strings.Contains(string(b), "ann@example.com") ||
			!strings.Contains(string(b), `"votes_cast":2`) {
			t.Errorf("the decided task: %d %s; want both votes in attempts, votes_cast 2", status, b)
		}
	})
}

func TestAgreementGet(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("owner@example.com")
		acct, reviewers := accountReviewers(t, a, "owner@example.com", "ann@example.com", "bob@example.com")
		// Two tasks asking two votes: one agreed, one split and vetoed.
		for _, verdicts := range [][2]string{{"approve", "approve"}, {"approve", "reject"}} {
			task := createTask(t, a, key, `{"prompt":"Release?","allowed_verdicts":["approve","reject"],"reviews_required":2,"veto":["reject"]}`)
			id := task["id"].(string)
			claimed, err := a.store.ClaimTasks(ctx, "w", 10, time.Minute)
			if err != nil || len(claimed) != 1 {
				t.Fatalf("claim = %v, %v", claimed, err)
			}
			if err := a.store.FinishAgentAttempt(ctx, "w", id, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}); err != nil {
				t.Fatal(err)
			}
			for i, p := range reviewers {
				if _, err := a.store.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: verdicts[i], Reviewer: p.Email, ReviewerID: p.ID}); err != nil {
					t.Fatal(err)
				}
			}
		}
		status, _, b := a.do("GET", "/v1/agreement", key, "")
		var report arbiter.AgreementReport
		if status != http.StatusOK || json.Unmarshal(b, &report) != nil {
			t.Fatalf("agreement = %d %s", status, b)
		}
		if report.Tasks != 2 || report.Pairs != 2 || report.Raw == nil || *report.Raw != 0.5 || len(report.Reviewers) != 2 {
			t.Fatalf("report = %s; want 2 tasks, 2 pairs, raw 0.5, 2 reviewers", b)
		}
		if ann := report.Reviewers[0]; ann.Email != "ann@example.com" || ann.Votes != 2 || ann.WithConsensus == nil || *ann.WithConsensus != 0.5 {
			t.Errorf("ann = %+v; want 2 votes, half with the consensus", ann)
		}
		if bob := report.Reviewers[1]; bob.WithConsensus == nil || *bob.WithConsensus != 1 {
			t.Errorf("bob = %+v; want every vote with the consensus", bob)
		}
		// Another account sees none of it.
		other := a.newKey("other@example.com")
		if status, _, b := a.do("GET", "/v1/agreement", other, ""); status != http.StatusOK || !strings.Contains(string(b), `"tasks":0`) {
			t.Errorf("another account's report = %d %s", status, b)
		}
		for _, q := range []string{"?days=0", "?days=366", "?days=x", "?task=1", "?days=7&days=30", "?days=7&days=7", "?days=7&x=%zz"} {
			status, h, b := a.do("GET", "/v1/agreement"+q, key, "")
			wantError(t, status, h, b, http.StatusBadRequest)
		}
		if status, _, b := a.do("GET", "/v1/agreement?days=7&days=30", key, ""); !strings.Contains(string(b), "days may be given once") {
			t.Errorf("a repeated days: %d %s", status, b)
		}
	})
}
