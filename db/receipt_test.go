package db_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// claimAndAnswer claims the task (among any others pending) and records
// the verifier's answer as the worker would: the step NextAgentStep makes
// of it, on the claimed task. Other claimed tasks go to a human.
func claimAndAnswer(t *testing.T, d *db.DB, taskID string, v arbiter.Verification) {
	t.Helper()
	claimed, err := d.ClaimTasks(ctx, "w", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		step := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, ActionDigest: c.ProposedDigest()}, Next: arbiter.StatusHumanNeeded}
		if c.ID == taskID {
			now := time.UnixMilli(1763805600000)
			step = arbiter.NextAgentStep(c, v, nil, now, now, arbiter.AgentRetry{Backoff: func(int) time.Duration { return time.Second }})
		}
		if err := d.FinishAgentAttempt(ctx, "w", c.ID, step); err != nil {
			t.Fatal(err)
		}
	}
}

// verifiedChain verifies the account's receipts of the tasks against the
// store's keys and returns their claims by task id; they must chain in
// the order of their seq, from 1, without a gap.
func verifiedChain(t *testing.T, d *db.DB, accountID string, ids []string) map[string]arbiter.ReceiptClaims {
	t.Helper()
	keys, err := d.ReceiptKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type link struct {
		receipt string
		claims  arbiter.ReceiptClaims
	}
	var chain []link
	out := map[string]arbiter.ReceiptClaims{}
	for _, id := range ids {
		task, err := d.FindTaskByID(ctx, accountID, id)
		if err != nil {
			t.Fatal(err)
		}
		if task.Receipt == "" {
			t.Fatalf("task %s (%s, %v) has no receipt", id, task.Status, task.FinalTier)
		}
		c, err := arbiter.VerifyReceipt(task.Receipt, keys)
		if err != nil {
			t.Fatalf("receipt of %s: %v", id, err)
		}
		if c.TaskID != id || c.Account != accountID || c.Verdict != *task.FinalVerdict || c.Tier != *task.FinalTier ||
			task.CompletedAt == nil || c.DecidedAt != *task.CompletedAt {
			t.Errorf("receipt of %s = %+v; the task: %s %s at %v", id, c, *task.FinalVerdict, *task.FinalTier, task.CompletedAt)
		}
		if task.ApprovedAction == nil || c.ActionDigest == nil || *c.ActionDigest != task.ApprovedAction.Digest {
			t.Errorf("receipt of %s names the action %v; the task approved %+v", id, c.ActionDigest, task.ApprovedAction)
		}
		chain = append(chain, link{task.Receipt, c})
		out[id] = c
	}
	slices.SortFunc(chain, func(a, b link) int { return int(a.claims.Seq - b.claims.Seq) })
	for i, l := range chain {
		if l.claims.Seq != int64(i+1) {
			t.Errorf("receipt %d has seq %d", i+1, l.claims.Seq)
		}
		switch {
		case i == 0 && l.claims.Prev != nil:
			t.Errorf("the first receipt names a previous one: %v", *l.claims.Prev)
		case i > 0 && (l.claims.Prev == nil || *l.claims.Prev != arbiter.ReceiptHash(chain[i-1].receipt)):
			t.Errorf("receipt %d does not name the hash of receipt %d", i+1, i)
		}
	}
	return out
}

// TestReceipts_EveryDecisionPathBindsAndSigns: the agent, a person (who
// edits), a consensus and the on-expiry outcome each record the action
// they approved and sign a receipt, chained in the account's order.
func TestReceipts_EveryDecisionPathBindsAndSigns(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, _, reviewers, voting := votingTeam(t, d, twoVotes)
		_ = voting // a plain task of the team, waiting: decided below like any other
		ann, bob := reviewers[0], reviewers[1]

		byAgent, err := d.CreateTask(ctx, acct.ID, actionCreate(t, "agent decides", refund))
		if err != nil {
			t.Fatal(err)
		}
		claimAndAnswer(t, d, byAgent.ID, arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 0.99, Model: "m1"})

		byPerson, err := d.CreateTask(ctx, acct.ID, actionCreate(t, "a person edits", refund))
		if err != nil {
			t.Fatal(err)
		}
		claimAndAnswer(t, d, byPerson.ID, arbiter.Verification{})
		edited := json.RawMessage(`{"amount": 80, "currency": "EUR", "note": "half"}`)
		got, err := d.DecideTask(ctx, acct.ID, byPerson.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: ann.Email,
			ReviewerID: ann.ID, ActionDigest: byPerson.Action.Digest, EditedArgs: edited})
		if err != nil {
			t.Fatal(err)
		}
		if got.ApprovedAction == nil || !got.ApprovedAction.Edited || got.Receipt == "" {
			t.Fatalf("decided = %+v", got)
		}

		consensus := votingTask(twoVotes)
		a, _ := arbiter.ParseAction(json.RawMessage(refund))
		consensus.Action, consensus.EditVerdicts = a, []string{"approve"}
		byVotes, err := d.CreateTask(ctx, acct.ID, consensus)
		if err != nil {
			t.Fatal(err)
		}
		claimAndAnswer(t, d, byVotes.ID, arbiter.Verification{})
		for _, p := range []*arbiter.Person{ann, bob} {
			v := voteBy(p, "approve")
			v.ActionDigest = a.Digest
			if _, err := d.DecideTask(ctx, acct.ID, byVotes.ID, v); err != nil {
				t.Fatal(err)
			}
		}

		fallback := actionCreate(t, "falls back", refund)
		fallback.DeadlineSeconds, fallback.OnExpiry = 60, arbiter.OnExpiry{Outcome: "verdict:approve"}
		byOutcome, err := d.CreateTask(ctx, acct.ID, fallback)
		if err != nil {
			t.Fatal(err)
		}
		claimAndAnswer(t, d, byOutcome.ID, arbiter.Verification{})
		if err := d.MoveDeadline(ctx, byOutcome.ID, arbiter.TimestampOf(time.Now().Add(-time.Minute))); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ExpireTasks(ctx, 100); err != nil {
			t.Fatal(err)
		}

		claims := verifiedChain(t, d, acct.ID, []string{byAgent.ID, byPerson.ID, byVotes.ID, byOutcome.ID})
		want := map[string]struct{ tier, decidedBy, digest string }{
			byAgent.ID:   {arbiter.TierAgent, "agent:m1", a.Digest},
			byPerson.ID:  {arbiter.TierHuman, ann.ID, got.ApprovedAction.Digest},
			byVotes.ID:   {arbiter.TierHuman, strings.Join(slices.Sorted(slices.Values([]string{ann.ID, bob.ID})), ","), a.Digest},
			byOutcome.ID: {arbiter.TierFallback, arbiter.DecidedByFallback, a.Digest},
		}
		for id, w := range want {
			c := claims[id]
			if c.Tier != w.tier || c.DecidedBy != w.decidedBy || *c.ActionDigest != w.digest {
				t.Errorf("receipt of %s: tier %s by %s digest %s; want %s by %s digest %s", id, c.Tier, c.DecidedBy, *c.ActionDigest,
					w.tier, w.decidedBy, w.digest)
			}
		}
		// Each attempt that decided records the digest it decided on.
		for _, id := range []string{byAgent.ID, byPerson.ID, byVotes.ID, byOutcome.ID} {
			task, _ := d.FindTaskByID(ctx, acct.ID, id)
			last := task.Attempts[len(task.Attempts)-1]
			if last.ActionDigest == nil || *last.ActionDigest != task.ApprovedAction.Digest {
				t.Errorf("%s: the deciding attempt's digest %v, approved %s", id, last.ActionDigest, task.ApprovedAction.Digest)
			}
		}
		// The edit is kept with both digests and its patch.
		person, _ := d.FindTaskByID(ctx, acct.ID, byPerson.ID)
		patch, _ := json.Marshal(person.ApprovedAction.Patch)
		if person.ApprovedAction.ProposedDigest != person.Action.Digest || string(patch) !=
			`[{"op":"replace","path":"/amount","value":80},{"op":"replace","path":"/note","value":"half"}]` ||
			person.ApprovedAction.EditedBy == nil || *person.ApprovedAction.EditedBy != ann.ID {
			t.Errorf("approved action = %+v, patch %s", person.ApprovedAction, patch)
		}
	})
}

// TestReceipts_AStaleCopyIsRefused: a decision whose copy shows another
// action than the one in force changes nothing.
func TestReceipts_AStaleCopyIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		task, err := d.CreateTask(ctx, acct.ID, actionCreate(t, "refund", refund))
		if err != nil {
			t.Fatal(err)
		}
		claimAndAnswer(t, d, task.ID, arbiter.Verification{})
		for _, digest := range []string{"", "sha256:" + strings.Repeat("0", 64)} {
			_, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com", ActionDigest: digest})
			wantCode(t, err, arbiter.ECONFLICT)
		}
		got, _ := d.FindTaskByID(ctx, acct.ID, task.ID)
		if got.Status != arbiter.StatusHumanNeeded || got.Receipt != "" || len(got.Attempts) != 1 {
			t.Errorf("after refused decisions: %s, receipt %q, %d attempts", got.Status, got.Receipt, len(got.Attempts))
		}
	})
}

// TestConsensus_AnEditRestartsTheVotes: ann approves the proposal; bob
// edits the amount and approves, which restarts the votes on the edit:
// ann's vote no longer counts, a vote on a copy of the proposal is
// refused, and the task completes when a second person approves the
// edit, which the receipt names.
func TestConsensus_AnEditRestartsTheVotes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, _, reviewers, _ := votingTeam(t, d, twoVotes)
		ann, bob, cat := reviewers[0], reviewers[1], reviewers[2]
		in := votingTask(twoVotes)
		a, _ := arbiter.ParseAction(json.RawMessage(refund))
		in.Action, in.EditVerdicts = a, []string{"approve"}
		task, err := d.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		claimAndAnswer(t, d, task.ID, arbiter.Verification{})
		vote := func(p *arbiter.Person, digest string, args json.RawMessage) (*arbiter.Task, error) {
			v := voteBy(p, "approve")
			v.ActionDigest, v.EditedArgs = digest, args
			return d.DecideTask(ctx, acct.ID, task.ID, v)
		}
		if _, err := vote(ann, a.Digest, nil); err != nil {
			t.Fatal(err)
		}
		after, err := vote(bob, a.Digest, json.RawMessage(`{"amount": 60, "currency": "EUR", "note": "late"}`))
		if err != nil {
			t.Fatal(err)
		}
		if after.Status != arbiter.StatusHumanNeeded {
			t.Fatalf("after bob's edit the task is %s; the votes restart, so one vote is not enough", after.Status)
		}
		cur, ok := after.CurrentAction()
		if !ok || !cur.Edited || cur.Digest == a.Digest {
			t.Fatalf("the action in force = %+v, want bob's edit", cur)
		}
		// Cat's copy shows the proposal: refused.
		_, err = vote(cat, a.Digest, nil)
		wantCode(t, err, arbiter.ECONFLICT)
		// Ann may vote again, on the edit, and that decides it.
		done, err := vote(ann, cur.Digest, nil)
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != arbiter.StatusCompleted || done.ApprovedAction == nil || done.ApprovedAction.Digest != cur.Digest {
			t.Fatalf("after ann's second vote: %s, approved %+v", done.Status, done.ApprovedAction)
		}
		claims := verifiedChain(t, d, acct.ID, []string{task.ID})
		if c := claims[task.ID]; c.DecidedBy != strings.Join(slices.Sorted(slices.Values([]string{ann.ID, bob.ID})), ",") {
			t.Errorf("decided by %s, want ann and bob", c.DecidedBy)
		}
		stored, _ := d.FindTaskByID(ctx, acct.ID, task.ID)
		var humans int
		for _, at := range stored.Attempts {
			if at.Tier == arbiter.TierHuman {
				humans++
			}
		}
		if humans != 3 {
			t.Errorf("%d human attempts, want 3 (ann's first vote is kept, not counted)", humans)
		}
	})
}

// TestReceipts_ConcurrentDecisionsChainWithoutAGap decides tasks of one
// account from two stores at once (two processes on Postgres): every
// receipt has its own seq, from 1 without a gap, and names the one before.
func TestReceipts_ConcurrentDecisionsChainWithoutAGap(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		other := d
		if d.Dialect() == db.Postgres {
			other = dbtest.OpenURL(t, d.URLForTest(), db.Options{})
		}
		acct := newAccount(t, d, "owner@example.com")
		const n = 16
		var ids []string
		for i := range n {
			task, err := d.CreateTask(ctx, acct.ID, actionCreate(t, fmt.Sprint("refund ", i), refund))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		if err := d.QueueAll(ctx, acct.ID); err != nil {
			t.Fatal(err)
		}
		digest := mustParse(t, refund).Digest
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i, id := range ids {
			store := d
			if i%2 == 1 {
				store = other
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := store.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com", ActionDigest: digest})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		verifiedChain(t, d, acct.ID, ids)
	})
}

func mustParse(t *testing.T, raw string) *arbiter.TaskAction {
	t.Helper()
	a, err := arbiter.ParseAction(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestReceiptKeys_Rotate: a rotation makes a new key sign; the JWKS keeps
// the old one, so that what it signed still verifies.
func TestReceiptKeys_Rotate(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		first, err := d.ReceiptKeys(ctx)
		if err != nil || len(first.Keys) != 1 {
			t.Fatalf("a new store's JWKS = %+v, %v; want one key", first, err)
		}
		decide := func() string {
			task, err := d.CreateTask(ctx, acct.ID, actionCreate(t, "refund", refund))
			if err != nil {
				t.Fatal(err)
			}
			claimAndAnswer(t, d, task.ID, arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 1})
			got, err := d.FindTaskByID(ctx, acct.ID, task.ID)
			if err != nil || got.Receipt == "" {
				t.Fatalf("task = %+v, %v", got, err)
			}
			return got.Receipt
		}
		old := decide()
		id, err := d.RotateReceiptKey(ctx)
		if err != nil || id == first.Keys[0].Kid {
			t.Fatalf("rotate = %q, %v", id, err)
		}
		fresh := decide()
		keys, err := d.ReceiptKeys(ctx)
		if err != nil || len(keys.Keys) != 2 || keys.Keys[0].Kid != id || keys.Keys[1].Kid != first.Keys[0].Kid {
			t.Fatalf("JWKS after the rotation = %+v, %v; want the new key first, then the old", keys, err)
		}
		for _, r := range []string{old, fresh} {
			if _, err := arbiter.VerifyReceipt(r, keys); err != nil {
				t.Errorf("a receipt does not verify after the rotation: %v", err)
			}
		}
		if _, err := arbiter.VerifyReceipt(fresh, first); err == nil {
			t.Error("the receipt after the rotation verifies with the old key alone")
		}
	})
}

// TestReceiptKeys_AnotherProcessSwitchesWithinTheBound: a store keeps the
// signing key it read for db.SignerTTL, so that a rotation in another
// process reaches it within that bound, not at once; the rotating store
// switches at once; everything signed on either side of the rotation
// verifies against the JWKS and chains without a gap.
func TestReceiptKeys_AnotherProcessSwitchesWithinTheBound(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		// The other process's clock stands still but when the test moves
		// it (ahead), an hour past the tasks' creation, so that it claims
		// them.
		start := time.Now().Add(time.Hour)
		var ahead atomic.Int64
		other := dbtest.OpenURL(t, d.URLForTest(), db.Options{Now: func() time.Time {
			return start.Add(time.Duration(ahead.Load()))
		}})
		acct := newAccount(t, d, "owner@example.com")
		keys, err := d.ReceiptKeys(ctx)
		if err != nil || len(keys.Keys) != 1 {
			t.Fatalf("a new store's JWKS = %+v, %v; want one key", keys, err)
		}
		first := keys.Keys[0].Kid
		var ids []string
		decide := func(store *db.DB) string {
			t.Helper()
			task, err := d.CreateTask(ctx, acct.ID, actionCreate(t, "refund", refund))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
			claimAndAnswer(t, store, task.ID, arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 1})
			got, err := d.FindTaskByID(ctx, acct.ID, task.ID)
			if err != nil || got.Receipt == "" {
				t.Fatalf("task = %+v, %v", got, err)
			}
			return receiptKid(t, got.Receipt)
		}
		if kid := decide(other); kid != first {
			t.Errorf("the other process signed with %q; want the one key, %q", kid, first)
		}
		second, err := d.RotateReceiptKey(ctx)
		if err != nil || second == first {
			t.Fatalf("rotate = %q, %v; the first key %q", second, err, first)
		}
		if kid := decide(other); kid != first {
			t.Errorf("within the bound, the other process signed with %q; want the key it read, %q", kid, first)
		}
		if kid := decide(d); kid != second {
			t.Errorf("the rotating process signed with %q; want the new key %q", kid, second)
		}
		ahead.Store(int64(db.SignerTTL + time.Second))
		if kid := decide(other); kid != second {
			t.Errorf("past the bound, the other process signed with %q; want the new key %q", kid, second)
		}
		verifiedChain(t, d, acct.ID, ids)
	})
}

// receiptKid returns the id of the key that signed the receipt, from its
// header.
func receiptKid(t *testing.T, receipt string) string {
	t.Helper()
	header, err := base64.RawURLEncoding.DecodeString(strings.Split(receipt, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Kid string }
	if err := json.Unmarshal(header, &h); err != nil || h.Kid == "" {
		t.Fatalf("receipt header %s: %v", header, err)
	}
	return h.Kid
}

// TestReceipts_ConcurrentAgentFinishesChainWithoutAGap: agent finishes of
// one account from two processes at once, each grouping its own (several
// groups in flight, groups of one among them), sign a chain without a gap
// or a repeat.
func TestReceipts_ConcurrentAgentFinishesChainWithoutAGap(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		other := dbtest.OpenURL(t, d.URLForTest(), db.Options{})
		acct := newAccount(t, d, "owner@example.com")
		const n = 40
		var ids []string
		for i := range n {
			task, err := d.CreateTask(ctx, acct.ID, actionCreate(t, fmt.Sprint("refund ", i), refund))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		claimed, err := d.ClaimTasks(ctx, "w", n, time.Minute)
		if err != nil || len(claimed) != n {
			t.Fatalf("claim = %d, %v", len(claimed), err)
		}
		now := time.UnixMilli(1763805600000)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i, c := range claimed {
			store := d
			if i%2 == 1 {
				store = other
			}
			step := arbiter.NextAgentStep(c, arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 0.95, Model: "m2"}, nil, now, now, arbiter.AgentRetry{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- store.FinishAgentAttempt(ctx, "w", c.ID, step)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		verifiedChain(t, d, acct.ID, ids)
	})
}

// TestReceipts_AGroupedFinishSignsEachDecision: finishes recorded as one
// group (Postgres's statement of many) bind and sign as one at a time do.
func TestReceipts_AGroupedFinishSignsEachDecision(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		// More receipts than one statement stores (receiptsPerInsert),
		// so that the chain runs across the statements of a group.
		var ids []string
		for i := range 205 {
			task, err := d.CreateTask(ctx, acct.ID, actionCreate(t, fmt.Sprint("refund ", i), refund))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		claimed, err := d.ClaimTasks(ctx, "w", 500, time.Minute)
		if err != nil || len(claimed) != len(ids) {
			t.Fatalf("claim = %d, %v", len(claimed), err)
		}
		var finishes []db.Finish
		now := time.UnixMilli(1763805600000)
		for _, c := range claimed {
			step := arbiter.NextAgentStep(c, arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 0.95, Model: "m2"}, nil, now, now, arbiter.AgentRetry{})
			finishes = append(finishes, db.Finish{Owner: "w", TaskID: c.ID, Step: step})
		}
		before := d.GroupedFinishes()
		for _, err := range d.FinishGroup(ctx, finishes) {
			if err != nil {
				t.Fatal(err)
			}
		}
		if d.Dialect() == db.Postgres && d.GroupedFinishes() == before {
			t.Fatal("the finishes were not grouped")
		}
		for id, c := range verifiedChain(t, d, acct.ID, ids) {
			if c.Tier != arbiter.TierAgent || c.DecidedBy != "agent:m2" {
				t.Errorf("receipt of %s: %s by %s", id, c.Tier, c.DecidedBy)
			}
		}
	})
}

// TestReceipts_TheWebhookCopyCarriesTheApprovedDigest: the completed
// event's task names the approved action with its digest, and its
// receipt.
func TestReceipts_TheWebhookCopyCarriesTheApprovedDigest(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		in := actionCreate(t, "refund", refund)
		in.CallbackURL = "https://workflow.example.com/resume" // no deliverer runs here
		task, err := d.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		claimAndAnswer(t, d, task.ID, arbiter.Verification{})
		decided, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com",
			ActionDigest: task.Action.Digest, EditedArgs: json.RawMessage(`{"amount": 99, "currency": "EUR", "note": "late"}`)})
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := d.ClaimWebhookMessages(ctx, "whd", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, del := range claimed {
			if del.Message.EventType != arbiter.EventTaskCompleted {
				continue
			}
			found = true
			var p struct {
				Data struct {
					ApprovedAction arbiter.ApprovedAction `json:"approved_action"`
					Receipt        string                 `json:"receipt"`
				} `json:"data"`
			}
			if err := json.Unmarshal(del.Message.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Data.ApprovedAction.Digest != decided.ApprovedAction.Digest || !p.Data.ApprovedAction.Edited || p.Data.Receipt != decided.Receipt {
				t.Errorf("the completed event's copy: %s", del.Message.Payload)
			}
		}
		if !found {
			t.Fatal("no task.completed message was queued")
		}
	})
}

// TestReceipts_TheChainLockWaitsOnNoOutboxRead: a decision reads every
// outbox's targets before it locks its account's receipt chain, so that
// the lock, which it holds to its commit, is held over its writes alone.
// Seen from outside: while the decision waits for the chain (another
// transaction holds it), a webhook endpoint made for the account gets
// none of its messages, as the decision had read the account's endpoints
// (none) before it came to the lock. Postgres: SQLite's one writer holds
// the store, not a chain.
func TestReceipts_TheChainLockWaitsOnNoOutboxRead(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	d := dbtest.OpenURL(t, url, db.Options{})
	acct := newAccount(t, d, "owner@example.com")
	first, err := d.CreateTask(ctx, acct.ID, actionCreate(t, "refund 12 EUR?", refund))
	if err != nil {
		t.Fatal(err)
	}
	task, err := d.CreateTask(ctx, acct.ID, actionCreate(t, "refund 13 EUR?", refund))
	if err != nil {
		t.Fatal(err)
	}
	// The first decision makes the chain; the other task goes to a person.
	claimAndAnswer(t, d, first.ID, arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 0.95, Model: "m2"})

	other, holder, pid := holdChain(t, url, acct.ID)
	done := make(chan error, 1)
	go func() {
		_, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com",
			ActionDigest: task.Action.Digest})
		done <- err
	}()
	waitForBlockedBy(t, other, pid)
	e, err := d.CreateWebhookEndpoint(ctx, acct.ID, arbiter.WebhookEndpointInput{URL: "https://hooks.example.com/arbiter"}, false,
		arbiter.Actor{Email: arbiter.OperatorActor})
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if msgs, err := d.ListWebhookMessages(ctx, acct.ID, e.ID, "", 100); err != nil || len(msgs) != 0 {
		t.Errorf("the endpoint made while the decision waited for the chain got %d messages (%v): the decision read the endpoints under the lock",
			len(msgs), err)
	}
	verifiedChain(t, d, acct.ID, []string{first.ID, task.ID})
}

// TestDecideTask_AnAccountsDecisionsLeaveThePoolToOthers: a process runs
// at most three of an account's human decisions at once (they take turns
// on its receipt chain anyway); the others wait in memory, not on the
// chain's lock holding a connection each, so that the requests around
// them still find one. Seen from outside, with a pool of four: while
// another transaction holds the chain, three decisions wait on it, two
// more wait for their turn, and a read of the account still answers.
// Postgres: SQLite's one writer holds the store, not a chain.
func TestDecideTask_AnAccountsDecisionsLeaveThePoolToOthers(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	d := dbtest.OpenURL(t, url, db.Options{MaxOpenConns: 4})
	acct := newAccount(t, d, "owner@example.com")
	var ids, digests []string
	for i := range 6 {
		task, err := d.CreateTask(ctx, acct.ID, actionCreate(t, fmt.Sprintf("refund %d EUR?", 10+i), refund))
		if err != nil {
			t.Fatal(err)
		}
		ids, digests = append(ids, task.ID), append(digests, task.Action.Digest)
	}
	// The first decision makes the chain; the other tasks go to a person.
	claimAndAnswer(t, d, ids[0], arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 0.95, Model: "m2"})

	other, holder, pid := holdChain(t, url, acct.ID)
	done := make(chan error, len(ids)-1)
	for i, id := range ids[1:] {
		go func() {
			_, err := d.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com",
				ActionDigest: digests[i+1]})
			done <- err
		}()
	}
	waitForBlocked(t, other, pid, 3)
	for deadline := time.Now().Add(30 * time.Second); d.DecisionsWaitingForTest(acct.ID) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d decisions wait for their turn, want 2", d.DecisionsWaitingForTest(acct.ID))
		}
	}
	read, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.FindTaskByID(read, acct.ID, ids[0]); err != nil {
		t.Fatalf("a read while the account's decisions wait for its chain: %v (their connections fill the pool)", err)
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	for range ids[1:] {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	verifiedChain(t, d, acct.ID, ids)
}

// holdChain locks the account's receipt chain in a transaction of another
// connection to the database at url, as another process's decision
// would, and returns that connection, the transaction (rolled back at the
// test's end unless committed) and its backend's pid.
func holdChain(t *testing.T, url, accountID string) (*sql.DB, *sql.Tx, int) {
	t.Helper()
	other, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	holder, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Rollback() })
	var pid int
	if err := holder.QueryRow(`SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(`SELECT 1 FROM receipt_chains WHERE account_id = $1 FOR UPDATE`, accountID); err != nil {
		t.Fatal(err)
	}
	return other, holder, pid
}

// waitForBlockedBy waits until a statement of the database waits on a
// lock the backend pid holds.
func waitForBlockedBy(t *testing.T, conn *sql.DB, pid int) {
	t.Helper()
	waitForBlocked(t, conn, pid, 1)
}

// waitForBlocked waits until at least want statements of the database
// wait on a lock the backend pid holds: on pid itself, or, queued behind
// another that waits on pid, on that one.
func waitForBlocked(t *testing.T, conn *sql.DB, pid, want int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(`SELECT count(*) FROM pg_stat_activity a WHERE $1 = ANY(pg_blocking_pids(a.pid))
			OR EXISTS (SELECT 1 FROM pg_stat_activity b WHERE b.pid = ANY(pg_blocking_pids(a.pid)) AND $1 = ANY(pg_blocking_pids(b.pid)))`,
			pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no statement waits on the held lock")
		}
	}
}
