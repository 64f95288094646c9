package db

import (
	"context"
	"fmt"
	"time"
)

// Turns: a chat outbox paces each of its destinations (a Slack channel, a
// Teams conversation) in the store, so every process keeps one pace. A
// destination's row holds who has its turn (holder, a message's id, until
// held_until, a lease) and when the next may start (next_at); the times
// are the database's.

// turnTable names a table of turns and its destination's column.
type turnTable struct{ table, key string }

// Tables of turns.
var (
	slackTurns = turnTable{"slack_channels", "channel"}
	teamsTurns = turnTable{"teams_turns", "conversation"}
)

// take takes the destination's turn for the holder, for lease at most, as
// one upsert that takes it only when it is free (nobody holds it, or the
// hold lapsed, and its pause is over), and reports whether it did; when
// not, how long until the pause ends, or whether another holds it.
func (t turnTable) take(ctx context.Context, tx *Tx, accountID, key, holder string, lease time.Duration) (taken bool, pause time.Duration, held bool, err error) {
	d, now := tx.db, tx.db.sqlNowMS()
	var got []string
	if err := tx.SelectContext(ctx, &got, d.rebind(`INSERT INTO `+t.table+` (account_id, `+t.key+`, holder, held_until)
		VALUES (?, ?, ?, `+now+` + ?)
		ON CONFLICT (account_id, `+t.key+`) DO UPDATE SET holder = excluded.holder, held_until = excluded.held_until
		WHERE `+t.table+`.next_at <= `+now+`
			AND (`+t.table+`.holder IS NULL OR `+t.table+`.held_until < `+now+`)
		RETURNING holder`), accountID, key, holder, lease.Milliseconds()); err != nil {
		return false, 0, false, fmt.Errorf("take the turn of %s: %w", key, err)
	}
	if len(got) > 0 {
		return true, 0, false, nil
	}
	var turn struct {
		Held  bool  `db:"held"`
		Pause int64 `db:"pause"`
	}
	if err := tx.GetContext(ctx, &turn, d.rebind(`SELECT
			CASE WHEN holder IS NOT NULL AND held_until >= `+now+` THEN 1 ELSE 0 END AS held,
			next_at - `+now+` AS pause
		FROM `+t.table+` WHERE account_id = ? AND `+t.key+` = ?`), accountID, key); err != nil {
		return false, 0, false, fmt.Errorf("find the turn of %s: %w", key, err)
	}
	if turn.Held {
		return false, 0, true, nil
	}
	return false, max(time.Duration(turn.Pause)*time.Millisecond, time.Millisecond), false, nil
}

// giveBack gives the destination's turn back, when holder has it, and
// keeps it quiet for quiet from now.
func (t turnTable) giveBack(ctx context.Context, tx *Tx, accountID, key, holder string, quiet time.Duration) error {
	d := tx.db
	if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE `+t.table+` SET holder = NULL, held_until = NULL,
		next_at = `+d.sqlNowMS()+` + ? WHERE account_id = ? AND `+t.key+` = ? AND holder = ?`),
		quiet.Milliseconds(), accountID, key, holder); err != nil {
		return fmt.Errorf("give back the turn of %s: %w", key, err)
	}
	return nil
}
