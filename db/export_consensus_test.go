package db

import (
	"context"
	"fmt"
)

// TaskMessages returns the event types and payloads of the webhook
// messages queued about the task, in the order queued.
func (d *DB) TaskMessages(ctx context.Context, taskID string) (types, payloads []string, err error) {
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT event_type, payload FROM webhook_messages WHERE task_id = ? ORDER BY created_at, id`), taskID)
	if err != nil {
		return nil, nil, fmt.Errorf("task messages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ, payload string
		if err := rows.Scan(&typ, &payload); err != nil {
			return nil, nil, err
		}
		types, payloads = append(types, typ), append(payloads, payload)
	}
	return types, payloads, rows.Err()
}
