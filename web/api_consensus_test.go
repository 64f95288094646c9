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

func TestAgreementGet(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("owner@example.com")
		acct, err := a.store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		owner, err := a.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "owner@example.com", Email: "owner@example.com", EmailVerified: true})
		if err != nil {
			t.Fatal(err)
		}
		var reviewers []*arbiter.Person
		for _, email := range []string{"ann@example.com", "bob@example.com"} {
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
