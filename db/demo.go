package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.DemoService = (*DB)(nil)

// demoEpoch is the fixed creation time of the demo queue (2025-11-22 10:00 UTC),
// so seeding is idempotent and the queue's order never changes.
const demoEpoch = 1763805600000

// demoTask is one entry of the curated demo queue, with the verifier's
// unsure answer that sent it to a human.
type demoTask struct {
	slug, source, taskType, touchpoint, prompt string
	verdicts                                   []string
	context                                    string
	verifier                                   demoAnswer
}

// demoAnswer is a seeded verifier attempt: a verdict with a confidence
// under the demo tasks' threshold, and why.
type demoAnswer struct {
	verdict    string
	confidence float64
	rationale  string
}

// demoModel names the verifier of the seeded attempts.
const demoModel = "demo-verifier"

// demoQueue is the curated demo queue, oldest first.
var demoQueue = []demoTask{
	{"refund_late_delivery", "support-bot", "decide", "chat",
		"Approve or reject this refund request? The customer says the order arrived nine days late and asks for a full refund.",
		[]string{"approve", "reject", "escalate"},
		`{"order_id":"ord_58213","amount":{"amount":"84.90","currency":"EUR"},"ordered_at":"2025-11-02","promised_by":"2025-11-06","delivered_at":"2025-11-15T16:40:00Z",` +
			`"conversation":[{"role":"system","content":"You are the shop's support assistant. Refunds over 50 EUR need a person's approval."},` +
			`{"role":"user","content":[{"type":"text","text":"My order ord_58213 came nine days late and the box was crushed. I want a full refund."},{"type":"image_url","image_url":{"url":"` + demoParcelPhoto + `"}}]},` +
			`{"role":"assistant","content":"I am sorry about the wait and the box. I have asked for a full refund of 84.90 EUR; a colleague will confirm it shortly."}],` +
			`"customer":{"tenure_months":31,"refunds_last_year":0},"policy":"Full refund when delivery is more than 7 days late."}`,
		demoAnswer{"approve", 0.72, "Delivered on 15 Nov against a promise of 6 Nov: nine days late, past the policy's seven, and the customer has had no refunds in the last year. Leaning approve, but the policy does not say whether lateness earns a full refund or a partial one."}},
	{"refund_used_item", "support-bot", "decide", "email",
		"Approve or reject this refund? The customer wants to return running shoes after wearing them for three weeks.",
		[]string{"approve", "reject", "escalate"},
		`{"order_id":"ord_57002","amount":{"amount":"139.00","currency":"USD"},"delivered_at":"2025-10-20","request":"They hurt after a few runs, I want my money back.","policy":"Returns within 30 days for unused items in original packaging.","photos":[{"type":"image","url":"https://cdn.example.com/returns/ord_57002/sole_wear.jpg"}]}`,
		demoAnswer{"reject", 0.64, "The policy covers unused items in their packaging, and the photo shows sole wear after three weeks of running. The complaint is about comfort, not a defect; a defect claim would change the answer."}},
	{"moderation_forum_post", "community-guard", "moderate", "forum",
		"Does this forum reply break the community guidelines on harassment?",
		[]string{"allow", "remove"},
		`{"thread":"Best budget mechanical keyboards 2025","reply":"Anyone who buys that brand deserves the broken switches they get, honestly you people never learn.","author":{"account_age_days":412,"prior_strikes":0},"guideline":"No personal attacks or insults aimed at other members."}`,
		demoAnswer{"remove", 0.55, "\"You people never learn\" is aimed at the members who bought the brand, which the guideline covers, but it reads more as venting about a product than as an attack; borderline."}},
	{"moderation_listing", "marketplace-review", "moderate", "listing",
		"Is this marketplace listing allowed under the prohibited items policy?",
		[]string{"allow", "remove", "needs_info"},
		`{"title":"Vintage hunting knife, 1970s, collector piece","price":"45.00","description":"Fixed blade, 12 cm, leather sheath included. Local pickup only, ID required.","category":"Collectibles","policy":"Knives with blades over 10 cm require age verification at pickup."}`,
		demoAnswer{"needs_info", 0.61, "The blade is 12 cm, over the 10 cm limit, so age verification applies at pickup. \"ID required\" may cover it, but the listing does not say the seller checks the buyer's age."}},
	{"code_review_diff", "ci-agent", "review", "pull_request",
		"Should this change be merged? It claims to fix an off-by-one error in pagination.",
		[]string{"approve", "request_changes"},
		`{"repository":"shop/api","pull_request":1842,"action":{"name":"merge_pull_request","arguments":{"repository":"shop/api","number":1842,"method":"squash"}},"ci_run":"https://ci.example.com/shop/api/runs/1842","diff":"--- a/pager.go\n+++ b/pager.go\n@@ -12,7 +12,7 @@ func Page(items []Item, page, size int) []Item {\n-\tstart := page * size\n+\tstart := (page - 1) * size\n \tend := start + size\n \tif end > len(items) {\n \t\tend = len(items)\n \t}\n \treturn items[start:end]\n","tests_passed":true,"note":"page is 1-based in the HTTP API; start is not checked against len(items)."}`,
		demoAnswer{"request_changes", 0.58, "The fix is right for a 1-based page: page 1 now starts at 0. But page 0 gives a negative start and panics, and start is still not checked against len(items), as the note says."}},
	{"fact_check_claim", "newsroom-assistant", "fact_check", "chat",
		"Is this claim in the draft article accurate?",
		[]string{"true", "false", "unverifiable"},
		`{"claim":"The Eiffel Tower was completed in 1889 for the World's Fair marking the centennial of the French Revolution.","draft":"paris-travel-guide","sources":["Encyclopaedia entry: Eiffel Tower, completed March 1889 for the Exposition Universelle."]}`,
		demoAnswer{"true", 0.78, "Completed in March 1889 for the Exposition Universelle, which marked the centennial of the French Revolution: the cited encyclopaedia entry agrees. Only one source is given."}},
	{"invoice_payment", "ap-automation", "decide", "workflow",
		"Approve payment of this supplier invoice?",
		[]string{"approve", "reject", "hold"},
		`{"supplier":"Nordlicht Logistics GmbH","invoice_number":"NL-2025-3391","amount":{"amount":"12480.00","currency":"EUR"},"purchase_order":{"number":"PO-7781","amount":"12480.00","status":"received"},"bank_details_changed_days_ago":2,"due_in_days":14}`,
		demoAnswer{"hold", 0.66, "Amount and purchase order match and the goods are received, but the supplier's bank details changed two days ago, a common sign of invoice fraud. Payment is due in 14 days, time enough to confirm the new details by phone."}},
	{"account_takeover", "trust-and-safety", "decide", "login",
		"Allow this login or lock the account for a suspected takeover?",
		[]string{"allow", "lock"},
		`{"user_id":"usr_19d2","login":{"country":"BR","asn":"AS14061 DigitalOcean","device":"new","time_utc":"2025-11-22T03:14:00Z"},"usual":{"country":"DE","device":"iPhone 15"},"password_reset_requested_minutes_before":6,"mfa_enabled":false}`,
		demoAnswer{"lock", 0.74, "A new device on a hosting provider's network in another country at 03:14, six minutes after a password reset request, on an account without MFA. Travel with a VPN would explain some of it; most signals point to a takeover."}},
	{"support_reply_tone", "support-bot", "review", "email",
		"Can this drafted support reply be sent as is?",
		[]string{"send", "rewrite"},
		`{"ticket":"Customer asked twice why their subscription was charged after cancelling.","draft_reply":{"type":"markdown","text":"Hello,\n\n**As I already explained**, cancellations take effect at the end of the billing period. Please read our [terms](https://example.com/terms).\n\nSupport team"},"customer_sentiment":"frustrated","charge":{"amount":"9.99","currency":"USD"}}`,
		demoAnswer{"rewrite", 0.69, "The facts are right, but \"As I already explained\" and \"Please read our terms\" will read as dismissive to a frustrated customer who has asked twice."}},
	{"medical_claim_ad", "ads-review", "moderate", "ad",
		"Does this ad make a health claim that our ad policy forbids?",
		[]string{"allow", "reject"},
		`{"headline":"Melt belly fat in 7 days - doctors hate it!","body":"Our green tea capsules burn fat while you sleep. No diet, no exercise.","landing_page":"https://example.com/slim","policy":"No unsubstantiated health or weight-loss claims."}`,
		demoAnswer{"reject", 0.79, "\"Melt belly fat in 7 days\" and \"burn fat while you sleep\" are weight-loss claims without support, which the policy forbids. Confident, but just under the threshold."}},
}

// SeedDemo creates the demo account and its curated queue when missing, each
// task with the verifier's unsure answer. The history behind the demo
// calibration report is SeedDemoHistory's. It is idempotent: it never
// changes a demo task's state, only brings its context up to date with
// the curated one (so the desk's views show on a demo seeded before), and
// only adds the answer to one that has no attempt.
func (d *DB) SeedDemo(ctx context.Context) error {
	return d.transact(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO accounts (id, email, daily_cap, created_at)
			VALUES (?, ?, 0, ?) ON CONFLICT DO NOTHING`), arbiter.DemoAccountID, arbiter.DemoAccountEmail, demoEpoch)
		if err != nil {
			return fmt.Errorf("seed demo account: %w", err)
		}
		if d.locksRows() {
			// Seeders in several processes take turns, so none adds an
			// attempt that another is adding.
			if _, err := tx.ExecContext(ctx, `SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, arbiter.DemoAccountID); err != nil {
				return fmt.Errorf("lock demo account: %w", err)
			}
		}
		for i, t := range demoQueue {
			verdicts, _ := json.Marshal(t.verdicts)
			created := int64(demoEpoch + i*60_000)
			_, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO task_states (id, account_id, status, task_type,
				source, touchpoint, confidence_threshold, created_at, run_after)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (id) DO NOTHING`),
				arbiter.DemoTaskIDPrefix+t.slug, arbiter.DemoAccountID, arbiter.StatusHumanNeeded,
				t.taskType, t.source, t.touchpoint, arbiter.DefaultConfidenceThreshold, created, created)
			if err != nil {
				return fmt.Errorf("seed demo task %s: %w", t.slug, err)
			}
			_, err = tx.ExecContext(ctx, d.rebind(`INSERT INTO task_bodies (id, prompt, allowed_verdicts, context)
				VALUES (?, ?, ?, ?)
				ON CONFLICT (id) DO UPDATE SET context = excluded.context WHERE task_bodies.context <> excluded.context`),
				arbiter.DemoTaskIDPrefix+t.slug, t.prompt, string(verdicts), t.context)
			if err != nil {
				return fmt.Errorf("seed demo task %s: %w", t.slug, err)
			}
			// The verifier's answer, for a task that has none yet: new
			// tasks, and tasks seeded before the demo had answers.
			_, err = tx.ExecContext(ctx, d.rebind(`INSERT INTO attempts (task_id, tier, verdict, confidence,
				rationale, model, started_at, finished_at)
				SELECT ?, ?, ?, CAST(? AS DOUBLE PRECISION), ?, ?, CAST(? AS BIGINT), CAST(? AS BIGINT)
				WHERE NOT EXISTS (SELECT 1 FROM attempts WHERE task_id = ?)`),
				arbiter.DemoTaskIDPrefix+t.slug, arbiter.TierAgent, t.verifier.verdict, t.verifier.confidence,
				t.verifier.rationale, demoModel, created, created+1800, arbiter.DemoTaskIDPrefix+t.slug)
			if err != nil {
				return fmt.Errorf("seed demo attempt %s: %w", t.slug, err)
			}
		}
		return nil
	})
}

// ListDemoTasks returns the demo queue, oldest first.
func (d *DB) ListDemoTasks(ctx context.Context) (_ []*arbiter.DemoTask, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT id, source, prompt, allowed_verdicts, context, created_at
		FROM tasks WHERE account_id = ? ORDER BY created_at, id`), arbiter.DemoAccountID)
	if err != nil {
		return nil, fmt.Errorf("list demo tasks: %w", err)
	}
	defer rows.Close()
	tasks := []*arbiter.DemoTask{}
	for rows.Next() {
		var (
			t                 arbiter.DemoTask
			verdicts, context string
		)
		if err := rows.Scan(&t.ID, &t.Source, &t.Prompt, &verdicts, &context, &t.CreatedAt); err != nil {
			return nil, fmt.Errorf("scan demo task: %w", err)
		}
		if err := json.Unmarshal([]byte(verdicts), &t.AllowedVerdicts); err != nil {
			return nil, fmt.Errorf("demo task %s: %w", t.ID, err)
		}
		t.Context = json.RawMessage(context)
		tasks = append(tasks, &t)
	}
	return tasks, rows.Err()
}

// FindDemoTask returns the demo task with its context, or ENOTFOUND when the
// demo account owns no task with the id.
func (d *DB) FindDemoTask(ctx context.Context, id string) (_ *arbiter.Task, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.FindTaskByID(ctx, arbiter.DemoAccountID, id)
}

// CreateDemoVerdict records a verdict on a demo task; the task never changes.
// Returns ENOTFOUND for a task the demo account does not own and EINVALID for
// a verdict outside the task's allowed verdicts.
func (d *DB) CreateDemoVerdict(ctx context.Context, in arbiter.DemoVerdictCreate) (_ *arbiter.DemoVerdict, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := in.Validate(); err != nil {
		return nil, err
	}
	t, err := d.FindDemoTask(ctx, in.TaskID)
	if err != nil {
		return nil, err
	} else if !t.Allows(in.Verdict) {
		return nil, arbiter.Errorf(arbiter.EINVALID, "verdict must be one of the task's allowed verdicts.")
	}
	v := &arbiter.DemoVerdict{
		ID:            arbiter.NewID("dv_", 8),
		TaskID:        t.ID,
		Verdict:       in.Verdict,
		Rationale:     in.Rationale,
		AnonSessionID: in.AnonSessionID,
		CreatedAt:     d.nowMS(),
	}
	_, err = d.db.ExecContext(ctx, d.rebind(`INSERT INTO demo_verdicts (id, task_id, verdict, rationale, anon_session_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`), v.ID, v.TaskID, v.Verdict, v.Rationale, v.AnonSessionID, int64(v.CreatedAt))
	if err != nil {
		return nil, fmt.Errorf("insert demo verdict: %w", err)
	}
	return v, nil
}

// FindDemoPlace returns where a demo task stands in the demo queue: the demo
// account's queue, whose tasks always wait.
func (d *DB) FindDemoPlace(ctx context.Context, id string) (_ arbiter.QueuePlace, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.FindQueuePlace(ctx, arbiter.DemoAccountID, id, "", arbiter.QueueView{})
}

// CountDemoVerdicts returns how many demo verdicts the anonymous session made.
func (d *DB) CountDemoVerdicts(ctx context.Context, anonSessionID string) (_ int, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var n int
	err = d.db.QueryRowContext(ctx, d.rebind(`SELECT COUNT(*) FROM demo_verdicts WHERE anon_session_id = ?`), anonSessionID).Scan(&n)
	return n, err
}

// pruneBatch bounds the rows one pruning statement deletes, so no statement
// holds the demo table (or SQLite's single writer) for long.
var pruneBatch = 5000

// PruneDemoVerdicts deletes the demo verdicts older than maxAge by the
// store's clock and the oldest beyond the newest keep, in batches, and
// returns how many it deleted.
func (d *DB) PruneDemoVerdicts(ctx context.Context, maxAge time.Duration, keep int) (_ int64, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	cutoff := int64(arbiter.TimestampOf(d.now().Add(-maxAge)))
	// The newest verdict beyond keep, if there is one: it and everything
	// older goes.
	var boundary struct {
		CreatedAt int64  `db:"created_at"`
		ID        string `db:"id"`
	}
	err = d.db.GetContext(ctx, &boundary, d.rebind(`SELECT created_at, id FROM demo_verdicts
		ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ?`), keep)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		boundary.CreatedAt, boundary.ID = cutoff, ""
	case err != nil:
		return 0, fmt.Errorf("find the oldest demo verdict to keep: %w", err)
	case boundary.CreatedAt < cutoff:
		boundary.CreatedAt, boundary.ID = cutoff, ""
	}
	del := d.rebind(`DELETE FROM demo_verdicts WHERE id IN (SELECT id FROM demo_verdicts
		WHERE created_at < ? OR (created_at = ? AND id <= ?) LIMIT ?)`)
	var total int64
	for {
		res, err := d.db.ExecContext(ctx, del, boundary.CreatedAt, boundary.CreatedAt, boundary.ID, pruneBatch)
		if err != nil {
			return total, fmt.Errorf("prune demo verdicts: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("prune demo verdicts: %w", err)
		}
		total += n
		if n < int64(pruneBatch) {
			return total, nil
		}
	}
}
