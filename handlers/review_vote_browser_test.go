package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestReviewDesk_TwoReviewersVoteWithTheKeyboard has Ann and Bob, each in
// a Chromium of their own, open one task that asks two votes with j and
// vote with 1 and Enter: both hold it at once, neither sees the verifier's
// answer nor the other's vote, Ann's vote leaves it waiting, and Bob's
// completes it with the consensus.
func TestReviewDesk_TwoReviewersVoteWithTheKeyboard(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			ctx := t.Context()
			store := dbtest.Open(t, dialect, db.Options{Now: steadyClock()})
			base, links := serveSite(t, store)
			acct, err := store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
			if err != nil {
				t.Fatal(err)
			}
			joinAsReviewer(t, store, acct.ID, "owner@example.com", "ann@example.com")
			joinAsReviewer(t, store, acct.ID, "owner@example.com", "bob@example.com")
			review := arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: arbiter.ConsensusUnanimous}
			task := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Release 12,000 EUR to the supplier?", Review: &review}, arbiter.StatusHumanNeeded)

			annCtx, bobCtx := newBrowser(t), newBrowser(t)
			signInAs(t, annCtx, base, links, "ann@example.com")
			signInAs(t, bobCtx, base, links, "bob@example.com")
			open := func(who string, bctx context.Context) {
				t.Helper()
				do(t, bctx, who+" opens the task with j",
					chromedp.Navigate(base+"/review"),
					chromedp.Poll[chromedp.Void](queueReady, chromedp.WithPollingTimeout(10*time.Second)),
					chromedp.KeyEvent("j"),
					until(onDesk(task.ID)+` && `+formReady),
					chromedp.WaitVisible(chromedp.CSS(`[data-testid=vote-banner]`)),
				)
				if got := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=reservation]`))); !strings.HasPrefix(got, "Reserved for you until ") {
					t.Errorf("%s's desk says %q", who, got)
				}
				html := value(t, bctx, chromedp.Evaluate[string](`document.querySelector('#review').outerHTML`))
				for _, hidden := range []string{"Not sure.", `data-testid="attempts"`, "vote recorded", "of 2 votes"} {
					if strings.Contains(html, hidden) {
						t.Errorf("%s's desk shows %q", who, hidden)
					}
				}
			}
			vote := func(who string, bctx context.Context) {
				t.Helper()
				do(t, bctx, who+" votes with 1 and Enter",
					chromedp.KeyEvent("1"),
					until(pressed("approve")),
					chromedp.KeyEvent("\r"),
					until(`location.pathname === '/review'`),
				)
			}
			// Both hold the task at once: two slots for two votes.
			open("ann", annCtx)
			open("bob", bobCtx)

			vote("ann", annCtx)
			if got := value(t, annCtx, chromedp.Text(chromedp.CSS(`[data-testid=alert-success]`))); !strings.Contains(got, `Your vote, "approve", is recorded.`) {
				t.Errorf("after her vote Ann's queue says %q", got)
			}
			if got, err := store.FindTaskByID(ctx, acct.ID, task.ID); err != nil || got.Status != arbiter.StatusHumanNeeded {
				t.Fatalf("after one vote the task is %v, %v; want waiting", got.Status, err)
			}

			vote("bob", bobCtx)
			got, err := store.FindTaskByID(ctx, acct.ID, task.ID)
			if err != nil || got.Status != arbiter.StatusCompleted || got.FinalVerdict == nil || *got.FinalVerdict != "approve" {
				t.Fatalf("after two votes the task is %+v, %v; want completed approve", got, err)
			}
			if c := arbiter.VoteCountOf(got); c.Votes != 2 {
				t.Errorf("votes = %d, want 2", c.Votes)
			}
		})
	}
}
