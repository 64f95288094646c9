package db

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/arbiterhq/arbiter"
)

// demoHistoryAnswers is how many answers of the demo verifier the seeded
// history covers; the labelled pairs are the routed ones and the audited
// ones among them.
const demoHistoryAnswers = 6000

// demoHistoryThreshold is the threshold of the demo history's tasks.
const demoHistoryThreshold = 0.8

// demoHistory returns the demo account's seeded labelled pairs: the same
// every time (a fixed seed), spread over the 60 days before the demo queue.
// Answers below demoHistoryThreshold went to a person and weigh 1; of those
// above it, one in 1/arbiter.DemoAuditRate was audited (by the task id's
// draw, as real tasks are) and weighs 1/rate. The verifier is wrong with
// probability s·(1 − c)^1.5, s from 0.9 to 1.3 by kind of task: about as
// often as its confidence says in the middle, less often near the top.
func demoHistory() []arbiter.LabelledPair {
	rng := rand.New(rand.NewPCG(16, 2025))
	kinds := []struct {
		taskType, source string
		verdicts         []string
		errorScale       float64
	}{
		{"decide", "support-bot", []string{"approve", "reject", "escalate"}, 1.0},
		{"moderate", "community-guard", []string{"allow", "remove"}, 1.3},
		{"review", "ci-agent", []string{"approve", "request_changes"}, 0.9},
		{"fact_check", "newsroom-assistant", []string{"true", "false", "unverifiable"}, 1.1},
	}
	const span = 60 * 24 * 60 * 60 * 1000 // 60 days, in ms
	var pairs []arbiter.LabelledPair
	for i := range demoHistoryAnswers {
		k := kinds[rng.IntN(len(kinds))]
		// Confidence: mostly high, as a verifier's are; two decimals.
		c := math.Round(math.Pow(rng.Float64(), 0.18)*100) / 100
		c = max(c, 0.3)
		agent := k.verdicts[rng.IntN(len(k.verdicts))]
		human := agent
		if rng.Float64() < k.errorScale*math.Pow(1-c, 1.5) {
			for human == agent {
				human = k.verdicts[rng.IntN(len(k.verdicts))]
			}
		}
		id := fmt.Sprintf("%shistory_%04d", arbiter.DemoTaskIDPrefix, i)
		created := arbiter.Timestamp(demoEpoch - span + int64(i)*span/demoHistoryAnswers)
		p := arbiter.LabelledPair{TaskID: id, AccountID: arbiter.DemoAccountID, TaskType: k.taskType, Source: k.source,
			Model: demoModel, Confidence: c, AgentVerdict: agent, HumanVerdict: human, Weight: 1,
			CreatedAt: created, LabelledAt: created + 600_000}
		if c >= demoHistoryThreshold {
			if !arbiter.ChosenForAudit(id, arbiter.DemoAuditRate) {
				continue // completed by the verifier, not audited: no pair
			}
			p.Audit, p.Weight = true, 1/arbiter.DemoAuditRate
		}
		pairs = append(pairs, p)
	}
	return pairs
}

// demoPairsPerStatement bounds the rows of one insert of the history: 14
// parameters each, far under either database's limit.
const demoPairsPerStatement = 250

// SeedDemoHistory stores the demo account's labelled pairs (demoHistory)
// unless it has some: the history behind the demo calibration report. The
// report's page calls it, so the history is written once, by the first
// visit, and not at every start of every process (and test) that seeds the
// demo queue. Once it has seen the history, a process only reads a flag.
func (d *DB) SeedDemoHistory(ctx context.Context) (err error) {
	if d.demoHistory.Load() {
		return nil
	}
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var seeded bool
	if err := d.db.GetContext(ctx, &seeded, d.rebind(`SELECT EXISTS (SELECT 1 FROM labelled_pairs WHERE account_id = ?)`),
		arbiter.DemoAccountID); err != nil {
		return fmt.Errorf("seed demo history: %w", err)
	}
	if !seeded {
		if err := d.transact(ctx, func(tx *Tx) error { return d.seedDemoHistory(ctx, tx) }); err != nil {
			return err
		}
		d.calibrations.forget(arbiter.DemoAccountID)
	}
	d.demoHistory.Store(true)
	return nil
}

// seedDemoHistory stores the demo's labelled pairs inside tx when the
// demo account has none yet, a few statements in all. On Postgres the
// demo account's row is locked first, so concurrent seeders take turns.
func (d *DB) seedDemoHistory(ctx context.Context, tx *Tx) error {
	if d.locksRows() {
		if _, err := tx.ExecContext(ctx, `SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, arbiter.DemoAccountID); err != nil {
			return fmt.Errorf("lock demo account: %w", err)
		}
	}
	var seeded bool
	if err := tx.GetContext(ctx, &seeded, d.rebind(`SELECT EXISTS (SELECT 1 FROM labelled_pairs WHERE account_id = ?)`),
		arbiter.DemoAccountID); err != nil {
		return fmt.Errorf("seed demo history: %w", err)
	}
	if seeded {
		return nil
	}
	pairs := demoHistory()
	for len(pairs) > 0 {
		n := min(len(pairs), demoPairsPerStatement)
		rows := make([]string, n)
		args := make([]any, 0, n*14)
		for i, p := range pairs[:n] {
			rows[i] = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
			args = append(args, p.TaskID, p.AccountID, p.TaskType, p.Source, p.Model, p.Confidence, p.Bucket(),
				p.AgentVerdict, p.HumanVerdict, boolInt(p.Correct()), boolInt(p.Audit), p.Weight,
				int64(p.CreatedAt), int64(p.LabelledAt))
		}
		_, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO labelled_pairs (task_id, account_id, task_type, source, model,
			confidence, bucket, agent_verdict, human_verdict, correct, audit, weight, created_at, labelled_at)
			VALUES `+strings.Join(rows, ", ")+` ON CONFLICT (task_id) DO NOTHING`), args...)
		if err != nil {
			return fmt.Errorf("seed demo history: %w", err)
		}
		pairs = pairs[n:]
	}
	return nil
}
