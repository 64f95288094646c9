package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

var (
	_ arbiter.WebhookService         = (*DB)(nil)
	_ arbiter.WebhookDeliveryService = (*DB)(nil)
)

// Webhooks: the outbox and its delivery.
//
// A change that callers care about publishes its events in its own
// transaction (outbox_webhook.go): one row of webhook_messages per
// destination, the endpoints of the account that want the event and the
// task's callback_url, with the payload as it is at that moment. Delivery
// workers claim due rows under a lease, as task workers claim tasks
// (SKIP LOCKED on Postgres; on SQLite one UPDATE … RETURNING under the one
// writer), and record each attempt, which moves the message on.

const endpointColumns = `id, account_id, url, description, event_types, disabled, secret, previous_secret,
	previous_secret_expires_at, failing_since, created_at`

// endpointRow is a scanned row of endpointColumns.
type endpointRow struct {
	ID                      string        `db:"id"`
	AccountID               string        `db:"account_id"`
	URL                     string        `db:"url"`
	Description             string        `db:"description"`
	EventTypes              string        `db:"event_types"`
	Disabled                string        `db:"disabled"`
	Secret                  string        `db:"secret"`
	PreviousSecret          string        `db:"previous_secret"`
	PreviousSecretExpiresAt sql.NullInt64 `db:"previous_secret_expires_at"`
	FailingSince            sql.NullInt64 `db:"failing_since"`
	CreatedAt               int64         `db:"created_at"`
}

// endpoint returns the row's endpoint, its secrets opened with keys
// (secrets.go).
func (r *endpointRow) endpoint(keys *secretbox.Keyring) (*arbiter.WebhookEndpoint, error) {
	secret, err := keys.Open(r.Secret, r.ID)
	if err != nil {
		return nil, fmt.Errorf("open the secret of endpoint %s: %w", r.ID, err)
	}
	previous, err := keys.Open(r.PreviousSecret, r.ID)
	if err != nil {
		return nil, fmt.Errorf("open the previous secret of endpoint %s: %w", r.ID, err)
	}
	e := &arbiter.WebhookEndpoint{
		ID: r.ID, AccountID: r.AccountID, URL: r.URL, Description: r.Description, Disabled: r.Disabled,
		Secret: secret, PreviousSecret: previous,
		PreviousSecretExpiresAt: nullTimestamp(r.PreviousSecretExpiresAt),
		FailingSince:            nullTimestamp(r.FailingSince),
		CreatedAt:               arbiter.Timestamp(r.CreatedAt),
	}
	if r.EventTypes != "" {
		e.EventTypes = strings.Split(r.EventTypes, ",")
	}
	return e, nil
}

var (
	errEndpointNotFound = arbiter.Errorf(arbiter.ENOTFOUND, "There is no such webhook endpoint in this account.")
	errMessageNotFound  = arbiter.Errorf(arbiter.ENOTFOUND, "There is no such message for this endpoint.")
	errMessageLeaseLost = arbiter.Errorf(arbiter.ECONFLICT, "The delivery worker no longer holds the message's lease.")
	errMessageInFlight  = arbiter.Errorf(arbiter.ECONFLICT, "The message is being delivered right now; its attempt will show in the log.")
)

// CreateWebhookEndpoint stores a new endpoint with a fresh secret and
// records it in the audit log, in one transaction.
func (d *DB) CreateWebhookEndpoint(ctx context.Context, accountID string, in arbiter.WebhookEndpointInput, allowPrivate bool, by arbiter.Actor) (_ *arbiter.WebhookEndpoint, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := in.Validate(allowPrivate); err != nil {
		return nil, err
	}
	e := &arbiter.WebhookEndpoint{
		ID: arbiter.NewWebhookEndpointID(), AccountID: accountID, URL: in.URL, Description: in.Description,
		EventTypes: in.EventTypes, Secret: arbiter.NewWebhookSecret(), CreatedAt: d.nowMS(),
	}
	stored, err := d.seal(e.Secret, e.ID)
	if err != nil {
		return nil, err
	}
	err = d.transact(ctx, func(tx *Tx) error {
		var n int
		if err := tx.GetContext(ctx, &n, d.rebind(`SELECT count(*) FROM webhook_endpoints WHERE account_id = ?`), accountID); err != nil {
			return fmt.Errorf("count endpoints: %w", err)
		} else if n >= arbiter.MaxWebhookEndpoints {
			return arbiter.Errorf(arbiter.ECONFLICT, "An account may have at most %d webhook endpoints; delete one first.", arbiter.MaxWebhookEndpoints)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO webhook_endpoints (id, account_id, url, description,
			event_types, secret, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`),
			e.ID, accountID, e.URL, e.Description, strings.Join(e.EventTypes, ","), stored, int64(e.CreatedAt)); err != nil {
			return fmt.Errorf("insert endpoint: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewWebhookAuditEvent(arbiter.AuditWebhookCreated, accountID, e, by))
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// UpdateWebhookEndpoint sets the account's endpoint's URL, description and
// event types and records it in the audit log, in one transaction.
func (d *DB) UpdateWebhookEndpoint(ctx context.Context, accountID, id string, in arbiter.WebhookEndpointInput, allowPrivate bool, by arbiter.Actor) (_ *arbiter.WebhookEndpoint, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := in.Validate(allowPrivate); err != nil {
		return nil, err
	}
	var e *arbiter.WebhookEndpoint
	err = d.transact(ctx, func(tx *Tx) error {
		if e, err = d.findEndpoint(ctx, tx, accountID, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE webhook_endpoints SET url = ?, description = ?, event_types = ?
			WHERE id = ? AND account_id = ?`), in.URL, in.Description, strings.Join(in.EventTypes, ","), id, accountID); err != nil {
			return fmt.Errorf("update endpoint: %w", err)
		}
		e.URL, e.Description, e.EventTypes = in.URL, in.Description, in.EventTypes
		return d.insertAuditEvent(ctx, tx, arbiter.NewWebhookAuditEvent(arbiter.AuditWebhookUpdated, accountID, e, by))
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// ListWebhookEndpoints returns the account's endpoints, oldest first.
func (d *DB) ListWebhookEndpoints(ctx context.Context, accountID string) (_ []*arbiter.WebhookEndpoint, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var rows []endpointRow
	if err := d.db.SelectContext(ctx, &rows, d.rebind(`SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE account_id = ? ORDER BY created_at, id`), accountID); err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	list := make([]*arbiter.WebhookEndpoint, len(rows))
	for i := range rows {
		if list[i], err = rows[i].endpoint(d.secrets); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// FindWebhookEndpoint returns the account's endpoint, or ENOTFOUND.
func (d *DB) FindWebhookEndpoint(ctx context.Context, accountID, id string) (_ *arbiter.WebhookEndpoint, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.findEndpoint(ctx, d.db, accountID, id)
}

func (d *DB) findEndpoint(ctx context.Context, q sqlx.QueryerContext, accountID, id string) (*arbiter.WebhookEndpoint, error) {
	if !arbiter.ValidWebhookEndpointID(id) {
		return nil, errEndpointNotFound
	}
	var r endpointRow
	err := sqlx.GetContext(ctx, q, &r, d.rebind(`SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE id = ? AND account_id = ?`), id, accountID)
	if err != nil {
		return nil, notFound(err, errEndpointNotFound.Message)
	}
	return r.endpoint(d.secrets)
}

// SetWebhookEndpointEnabled enables or disables the account's endpoint and
// records it in the audit log. Enabling forgets its failures.
func (d *DB) SetWebhookEndpointEnabled(ctx context.Context, accountID, id string, enabled bool, by arbiter.Actor) (_ *arbiter.WebhookEndpoint, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var e *arbiter.WebhookEndpoint
	err = d.transact(ctx, func(tx *Tx) error {
		if e, err = d.findEndpoint(ctx, tx, accountID, id); err != nil {
			return err
		} else if e.Enabled() == enabled {
			return nil
		}
		kind, disabled := arbiter.AuditWebhookEnabled, ""
		if !enabled {
			kind, disabled = arbiter.AuditWebhookDisabled, arbiter.WebhookDisabledByPerson
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE webhook_endpoints SET disabled = ?, failing_since = NULL
			WHERE id = ? AND account_id = ?`), disabled, id, accountID); err != nil {
			return fmt.Errorf("set endpoint enabled: %w", err)
		}
		hold := d.holdMessages
		if enabled {
			hold = d.releaseHeldMessages
			tx.queue(outboxOf[*webhookOutbox](d).wake)
		}
		if err := hold(ctx, tx, id); err != nil {
			return err
		}
		e.Disabled, e.FailingSince = disabled, nil
		return d.insertAuditEvent(ctx, tx, arbiter.NewWebhookAuditEvent(kind, accountID, e, by))
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// holdMessages holds, in tx, the endpoint's messages waiting to be sent
// that no worker is sending: they stay, as held, until it is enabled
// again. Pings stay pending: they go to a disabled endpoint too.
func (d *DB) holdMessages(ctx context.Context, tx *Tx, endpointID string) error {
	if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE webhook_messages SET status = 'held'
		WHERE endpoint_id = ? AND status = 'pending' AND event_type <> 'ping'
		AND (lease_expires_at IS NULL OR lease_expires_at < `+d.sqlNowMS()+`)`), endpointID); err != nil {
		return fmt.Errorf("hold webhook messages: %w", err)
	}
	return nil
}

// releaseHeldMessages makes, in tx, the messages that waited for the
// endpoint while it was disabled (held, or pending on their schedule) due
// at once, in the order they were written: each is due at its creation
// time, and claims take the earliest first.
func (d *DB) releaseHeldMessages(ctx context.Context, tx *Tx, endpointID string) error {
	if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE webhook_messages SET status = 'pending', next_attempt_at = created_at
		WHERE endpoint_id = ? AND status IN ('held', 'pending')
		AND (lease_expires_at IS NULL OR lease_expires_at < `+d.sqlNowMS()+`)`), endpointID); err != nil {
		return fmt.Errorf("release held webhook messages: %w", err)
	}
	return nil
}

// DeleteWebhookEndpoint deletes the account's endpoint, its messages and
// their attempts, and records it in the audit log.
func (d *DB) DeleteWebhookEndpoint(ctx context.Context, accountID, id string, by arbiter.Actor) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	return d.transact(ctx, func(tx *Tx) error {
		e, err := d.findEndpoint(ctx, tx, accountID, id)
		if err != nil {
			return err
		}
		// SQLite cascades only with foreign keys on, which the store's
		// connections have; the attempts go first either way.
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM webhook_attempts WHERE message_id IN
			(SELECT id FROM webhook_messages WHERE endpoint_id = ?)`), id); err != nil {
			return fmt.Errorf("delete attempts: %w", err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM webhook_messages WHERE endpoint_id = ?`), id); err != nil {
			return fmt.Errorf("delete messages: %w", err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM webhook_endpoints WHERE id = ? AND account_id = ?`), id, accountID); err != nil {
			return fmt.Errorf("delete endpoint: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewWebhookAuditEvent(arbiter.AuditWebhookDeleted, accountID, e, by))
	})
}

// RotateWebhookSecret gives the account's endpoint a new secret; the old one
// signs beside it for arbiter.WebhookSecretOverlap.
func (d *DB) RotateWebhookSecret(ctx context.Context, accountID, id string, by arbiter.Actor) (_ *arbiter.WebhookEndpoint, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var e *arbiter.WebhookEndpoint
	err = d.transact(ctx, func(tx *Tx) error {
		if e, err = d.findEndpoint(ctx, tx, accountID, id); err != nil {
			return err
		}
		until := arbiter.TimestampOf(d.now().Add(arbiter.WebhookSecretOverlap))
		e.PreviousSecret, e.PreviousSecretExpiresAt, e.Secret = e.Secret, &until, arbiter.NewWebhookSecret()
		secret, err := d.seal(e.Secret, e.ID)
		if err != nil {
			return err
		}
		previous, err := d.seal(e.PreviousSecret, e.ID)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE webhook_endpoints SET secret = ?, previous_secret = ?,
			previous_secret_expires_at = ? WHERE id = ? AND account_id = ?`),
			secret, previous, int64(until), id, accountID); err != nil {
			return fmt.Errorf("rotate endpoint secret: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewWebhookAuditEvent(arbiter.AuditWebhookRotated, accountID, e, by))
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// callbackSecretRow is a scanned row of webhook_callback_secrets.
type callbackSecretRow struct {
	AccountID               string        `db:"account_id"`
	Secret                  string        `db:"secret"`
	PreviousSecret          string        `db:"previous_secret"`
	PreviousSecretExpiresAt sql.NullInt64 `db:"previous_secret_expires_at"`
}

// secret returns the row's callback secret, opened with keys
// (secrets.go).
func (r *callbackSecretRow) secret(keys *secretbox.Keyring) (*arbiter.CallbackSecret, error) {
	secret, err := keys.Open(r.Secret, r.AccountID)
	if err != nil {
		return nil, fmt.Errorf("open the callback secret of account %s: %w", r.AccountID, err)
	}
	previous, err := keys.Open(r.PreviousSecret, r.AccountID)
	if err != nil {
		return nil, fmt.Errorf("open the previous callback secret of account %s: %w", r.AccountID, err)
	}
	return &arbiter.CallbackSecret{AccountID: r.AccountID, Secret: secret, PreviousSecret: previous,
		PreviousSecretExpiresAt: nullTimestamp(r.PreviousSecretExpiresAt)}, nil
}

const callbackSecretColumns = `account_id, secret, previous_secret, previous_secret_expires_at`

// ensureCallbackSecret gives the account a callback secret unless it has
// one.
func (d *DB) ensureCallbackSecret(ctx context.Context, q sqlx.ExecerContext, accountID string) error {
	secret, err := d.seal(arbiter.NewWebhookSecret(), accountID)
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx, d.rebind(`INSERT INTO webhook_callback_secrets (account_id, secret, created_at)
		VALUES (?, ?, ?) ON CONFLICT (account_id) DO NOTHING`), accountID, secret, int64(d.nowMS()))
	if err != nil {
		return fmt.Errorf("create callback secret: %w", err)
	}
	return nil
}

// FindCallbackSecret returns the account's callback secret, creating it
// on first use.
func (d *DB) FindCallbackSecret(ctx context.Context, accountID string) (_ *arbiter.CallbackSecret, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var r callbackSecretRow
	err = d.transact(ctx, func(tx *Tx) error {
		if err := d.ensureCallbackSecret(ctx, tx, accountID); err != nil {
			return err
		}
		return tx.GetContext(ctx, &r, d.rebind(`SELECT `+callbackSecretColumns+` FROM webhook_callback_secrets
			WHERE account_id = ?`), accountID)
	})
	if err != nil {
		return nil, fmt.Errorf("find callback secret: %w", err)
	}
	return r.secret(d.secrets)
}

// RotateCallbackSecret gives the account a new callback secret; the old one
// signs beside it for arbiter.WebhookSecretOverlap.
func (d *DB) RotateCallbackSecret(ctx context.Context, accountID string, by arbiter.Actor) (_ *arbiter.CallbackSecret, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var r callbackSecretRow
	err = d.transact(ctx, func(tx *Tx) error {
		if err := d.ensureCallbackSecret(ctx, tx, accountID); err != nil {
			return err
		}
		until := int64(arbiter.TimestampOf(d.now().Add(arbiter.WebhookSecretOverlap)))
		secret, err := d.seal(arbiter.NewWebhookSecret(), accountID)
		if err != nil {
			return err
		}
		if err := tx.GetContext(ctx, &r, d.rebind(`UPDATE webhook_callback_secrets SET previous_secret = secret,
			previous_secret_expires_at = ?, secret = ? WHERE account_id = ?
			RETURNING `+callbackSecretColumns), until, secret, accountID); err != nil {
			return fmt.Errorf("rotate callback secret: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewWebhookAuditEvent(arbiter.AuditCallbackSecretRotated, accountID, nil, by))
	})
	if err != nil {
		return nil, err
	}
	return r.secret(d.secrets)
}

// SendWebhookPing queues a ping to the account's endpoint, due at once.
func (d *DB) SendWebhookPing(ctx context.Context, accountID, endpointID string) (_ *arbiter.WebhookMessage, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	now := d.now()
	payload, err := arbiter.NewWebhookPayload(arbiter.EventPing, now, arbiter.PingData{EndpointID: endpointID})
	if err != nil {
		return nil, err
	}
	m := &arbiter.WebhookMessage{ID: arbiter.NewWebhookMessageID(), AccountID: accountID, EndpointID: endpointID,
		EventType: arbiter.EventPing, Payload: payload, Status: arbiter.WebhookPending,
		NextAttemptAt: arbiter.TimestampOf(now), CreatedAt: arbiter.TimestampOf(now)}
	err = d.transact(ctx, func(tx *Tx) error {
		e, err := d.findEndpoint(ctx, tx, accountID, endpointID)
		if err != nil {
			return err
		}
		m.URL = e.URL
		return outboxOf[*webhookOutbox](d).insert(ctx, tx, []*arbiter.WebhookMessage{m})
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// messageColumns lists, in scan order, the columns messageRow reads.
const messageColumns = `m.id, m.account_id, m.endpoint_id, m.url, m.event_type, m.task_id, m.payload, m.status,
	m.attempts, m.next_attempt_at, m.created_at, m.last_attempt_at, m.last_status_code, COALESCE(m.traceparent, '') AS traceparent`

// messageRow is a scanned row of messageColumns.
type messageRow struct {
	ID             string         `db:"id"`
	AccountID      string         `db:"account_id"`
	EndpointID     sql.NullString `db:"endpoint_id"`
	URL            string         `db:"url"`
	EventType      string         `db:"event_type"`
	TaskID         sql.NullString `db:"task_id"`
	Payload        string         `db:"payload"`
	Status         string         `db:"status"`
	Attempts       int            `db:"attempts"`
	NextAttemptAt  int64          `db:"next_attempt_at"`
	CreatedAt      int64          `db:"created_at"`
	LastAttemptAt  sql.NullInt64  `db:"last_attempt_at"`
	LastStatusCode int            `db:"last_status_code"`
	TraceParent    string         `db:"traceparent"`
}

func (r *messageRow) message() *arbiter.WebhookMessage {
	return &arbiter.WebhookMessage{
		ID: r.ID, AccountID: r.AccountID, EndpointID: r.EndpointID.String, URL: r.URL, EventType: r.EventType,
		TaskID: r.TaskID.String, Payload: []byte(r.Payload), Status: r.Status, Attempts: r.Attempts,
		NextAttemptAt: arbiter.Timestamp(r.NextAttemptAt), CreatedAt: arbiter.Timestamp(r.CreatedAt),
		LastAttemptAt: nullTimestamp(r.LastAttemptAt), LastStatusCode: r.LastStatusCode, TraceParent: r.TraceParent,
	}
}

// ListWebhookMessages returns the endpoint's latest messages, newest first.
func (d *DB) ListWebhookMessages(ctx context.Context, accountID, endpointID, status string, limit int) (_ []*arbiter.WebhookMessage, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if status != "" && !containsString(arbiter.WebhookMessageStatuses, status) {
		return nil, arbiter.Errorf(arbiter.EINVALID, "The status must be one of %s.", strings.Join(arbiter.WebhookMessageStatuses, ", "))
	}
	if _, err := d.findEndpoint(ctx, d.db, accountID, endpointID); err != nil {
		return nil, err
	}
	var rows []messageRow
	if err := d.db.SelectContext(ctx, &rows, d.rebind(`SELECT `+messageColumns+` FROM webhook_messages m
		WHERE m.endpoint_id = ? AND m.account_id = ? AND (? = '' OR m.status = ?)
		ORDER BY m.created_at DESC, m.id DESC LIMIT ?`), endpointID, accountID, status, status, limit); err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	list := make([]*arbiter.WebhookMessage, len(rows))
	for i := range rows {
		list[i] = rows[i].message()
	}
	return list, nil
}

// FindWebhookMessage returns the endpoint's message and its attempts.
func (d *DB) FindWebhookMessage(ctx context.Context, accountID, endpointID, messageID string) (_ *arbiter.WebhookMessage, _ []arbiter.WebhookAttempt, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if !arbiter.ValidWebhookMessageID(messageID) || !arbiter.ValidWebhookEndpointID(endpointID) {
		return nil, nil, errMessageNotFound
	}
	var r messageRow
	if err := d.db.GetContext(ctx, &r, d.rebind(`SELECT `+messageColumns+` FROM webhook_messages m
		WHERE m.id = ? AND m.endpoint_id = ? AND m.account_id = ?`), messageID, endpointID, accountID); err != nil {
		return nil, nil, notFound(err, errMessageNotFound.Message)
	}
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT attempted_at, status_code, latency_ms, response_body, error
		FROM webhook_attempts WHERE message_id = ? ORDER BY id`), messageID)
	if err != nil {
		return nil, nil, fmt.Errorf("list attempts: %w", err)
	}
	defer rows.Close()
	var attempts []arbiter.WebhookAttempt
	for rows.Next() {
		a := arbiter.WebhookAttempt{MessageID: messageID}
		var at, latency int64
		if err := rows.Scan(&at, &a.StatusCode, &latency, &a.ResponseBody, &a.Error); err != nil {
			return nil, nil, fmt.Errorf("scan attempt: %w", err)
		}
		a.AttemptedAt, a.Latency = arbiter.Timestamp(at), time.Duration(latency)*time.Millisecond
		attempts = append(attempts, a)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("list attempts: %w", err)
	}
	return r.message(), attempts, nil
}

// heldIfDisabled is the status of a message sent again to the endpoint
// named by its one argument: held while the endpoint is disabled.
const heldIfDisabled = `CASE WHEN EXISTS (SELECT 1 FROM webhook_endpoints WHERE id = ? AND disabled <> '')
	THEN 'held' ELSE 'pending' END`

// ResendWebhookMessage makes the endpoint's message due at once, with its
// schedule started over, unless a worker is delivering it right now.
func (d *DB) ResendWebhookMessage(ctx context.Context, accountID, endpointID, messageID string) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if !arbiter.ValidWebhookMessageID(messageID) || !arbiter.ValidWebhookEndpointID(endpointID) {
		return errMessageNotFound
	}
	err = d.transact(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, d.rebind(`UPDATE webhook_messages SET status = `+heldIfDisabled+`, attempts = 0,
			next_attempt_at = ? WHERE id = ? AND endpoint_id = ? AND account_id = ?
			AND (lease_expires_at IS NULL OR lease_expires_at < `+d.sqlNowMS()+`)`),
			endpointID, int64(tx.now), messageID, endpointID, accountID)
		if err != nil {
			return fmt.Errorf("resend message: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("resend message: %w", err)
		} else if n == 0 {
			return errMessageInFlight
		}
		tx.queue(outboxOf[*webhookOutbox](d).wake)
		return nil
	})
	if err == errMessageInFlight {
		// Not sent again: the message is another account's or endpoint's,
		// or a worker holds it.
		if _, _, err := d.FindWebhookMessage(ctx, accountID, endpointID, messageID); err != nil {
			return err
		}
	}
	return err
}

// ResendFailedWebhookMessages resends the endpoint's failed messages
// created at or after since.
func (d *DB) ResendFailedWebhookMessages(ctx context.Context, accountID, endpointID string, since arbiter.Timestamp) (_ int, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var n int64
	err = d.transact(ctx, func(tx *Tx) error {
		if _, err := d.findEndpoint(ctx, tx, accountID, endpointID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, d.rebind(`UPDATE webhook_messages SET status = `+heldIfDisabled+`, attempts = 0,
			next_attempt_at = ? WHERE endpoint_id = ? AND account_id = ? AND status = 'failed' AND created_at >= ?`),
			endpointID, int64(d.nowMS()), endpointID, accountID, int64(since))
		if err != nil {
			return fmt.Errorf("resend failed messages: %w", err)
		}
		if n, err = res.RowsAffected(); n > 0 {
			tx.queue(outboxOf[*webhookOutbox](d).wake)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ClaimWebhookMessages leases up to max due messages to owner (see
// arbiter.WebhookDeliveryService), in one statement: on Postgres, rows
// other workers hold locked are skipped; on SQLite, the one writer makes
// the UPDATE … RETURNING exclusive. A message to a disabled endpoint waits,
// unless it is a ping.
func (d *DB) ClaimWebhookMessages(ctx context.Context, owner string, max int, lease time.Duration) (_ []*arbiter.WebhookDelivery, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if max <= 0 {
		return nil, nil
	}
	msgs, err := claimRows(ctx, d, "claim webhook messages", d.claims.webhooks, scanClaimedMessage,
		owner, lease.Milliseconds(), int64(d.nowMS()), max)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	return d.signingSecrets(ctx, msgs)
}

// claimWebhooksSQL is ClaimWebhookMessages's statement, assembled once when
// the store opens (DB.claims). Arguments: owner, lease (ms), now, max.
func (d *DB) claimWebhooksSQL() string {
	return `UPDATE webhook_messages SET lease_owner = ?, lease_expires_at = ` + d.sqlNowMS() + ` + ?
		WHERE id IN (SELECT m.id FROM webhook_messages m
			WHERE m.status = 'pending' AND m.next_attempt_at <= ?
			AND (m.lease_expires_at IS NULL OR m.lease_expires_at < ` + d.sqlNowMS() + `)
			AND (m.endpoint_id IS NULL OR m.event_type = 'ping' OR EXISTS (SELECT 1 FROM webhook_endpoints e
				WHERE e.id = m.endpoint_id AND e.disabled = ''))
			ORDER BY m.next_attempt_at LIMIT ? ` + d.sqlSkipLocked() + `)
		RETURNING ` + strings.ReplaceAll(messageColumns, "m.", "")
}

// scanClaimedMessage reads a message a claim leased.
func scanClaimedMessage(rows *sql.Rows) (*arbiter.WebhookMessage, error) {
	var r messageRow
	if err := rows.Scan(&r.ID, &r.AccountID, &r.EndpointID, &r.URL, &r.EventType, &r.TaskID, &r.Payload,
		&r.Status, &r.Attempts, &r.NextAttemptAt, &r.CreatedAt, &r.LastAttemptAt, &r.LastStatusCode, &r.TraceParent); err != nil {
		return nil, fmt.Errorf("claim webhook messages: %w", err)
	}
	return r.message(), nil
}

// signingSecrets pairs claimed messages with their destination's URL and
// the secrets that sign them now. A message whose endpoint was deleted
// since the claim is left out; its row went with the endpoint.
func (d *DB) signingSecrets(ctx context.Context, msgs []*arbiter.WebhookMessage) ([]*arbiter.WebhookDelivery, error) {
	var endpointIDs, accountIDs []any
	for _, m := range msgs {
		if m.EndpointID != "" {
			endpointIDs = append(endpointIDs, m.EndpointID)
		} else {
			accountIDs = append(accountIDs, m.AccountID)
		}
	}
	var err error
	endpoints := map[string]*arbiter.WebhookEndpoint{}
	if len(endpointIDs) > 0 {
		var rows []endpointRow
		if err := d.selectIn(ctx, d.db, &rows, `SELECT `+endpointColumns+` FROM webhook_endpoints
			WHERE id IN (?)`, endpointIDs); err != nil {
			return nil, fmt.Errorf("read endpoints: %w", err)
		}
		for i := range rows {
			if endpoints[rows[i].ID], err = rows[i].endpoint(d.secrets); err != nil {
				return nil, err
			}
		}
	}
	callbacks := map[string]*arbiter.CallbackSecret{}
	if len(accountIDs) > 0 {
		var rows []callbackSecretRow
		if err := d.selectIn(ctx, d.db, &rows, `SELECT `+callbackSecretColumns+` FROM webhook_callback_secrets
			WHERE account_id IN (?)`, accountIDs); err != nil {
			return nil, fmt.Errorf("read callback secrets: %w", err)
		}
		for i := range rows {
			if callbacks[rows[i].AccountID], err = rows[i].secret(d.secrets); err != nil {
				return nil, err
			}
		}
	}
	now := d.now()
	out := make([]*arbiter.WebhookDelivery, 0, len(msgs))
	for _, m := range msgs {
		if m.EndpointID != "" {
			if e := endpoints[m.EndpointID]; e != nil {
				m.URL = e.URL
				out = append(out, &arbiter.WebhookDelivery{Message: m, Secrets: e.SigningSecrets(now)})
			}
		} else if c := callbacks[m.AccountID]; c != nil {
			out = append(out, &arbiter.WebhookDelivery{Message: m, Secrets: c.SigningSecrets(now)})
		}
	}
	return out, nil
}

// RecordWebhookAttempt records an attempt on a message leased to owner and
// moves the message on as step says, tracking its endpoint's failures, in
// one transaction. It is RecordWebhookAttempts for one.
func (d *DB) RecordWebhookAttempt(ctx context.Context, owner, messageID string, step arbiter.WebhookStep) (*arbiter.DisabledWebhookEndpoint, error) {
	out, err := d.RecordWebhookAttempts(ctx, owner, []arbiter.WebhookRecord{{MessageID: messageID, Step: step}})
	if err != nil {
		return nil, err
	}
	return out[0].Disabled, out[0].Err
}

const (
	recordMessageSQL = `UPDATE webhook_messages SET status = ?, attempts = attempts + 1,
		next_attempt_at = ?, lease_owner = NULL, lease_expires_at = NULL, last_attempt_at = ?, last_status_code = ?
		WHERE id = ? AND lease_owner = ? AND status = 'pending' RETURNING endpoint_id`
	insertWebhookAttemptSQL = `INSERT INTO webhook_attempts (message_id, attempted_at, status_code,
		latency_ms, response_body, error) VALUES (?, ?, ?, ?, ?, ?)`
	endpointDeliveredSQL = `UPDATE webhook_endpoints SET failing_since = NULL
		WHERE id = ? AND failing_since IS NOT NULL`
)

// RecordWebhookAttempts records attempts on messages leased to owner, in
// one transaction, so that many deliveries share a commit; each is
// recorded as RecordWebhookAttempt says, and one whose lease was lost is
// answered ECONFLICT without failing the others. On Postgres the messages
// and their attempts are written by one statement (recordManySQL), as
// River's completer does; on SQLite, where a statement costs no round
// trip, one by one.
//
// Attempts of many accounts share the transaction, so one that the store
// refuses must not leave the others unrecorded (and sent again): when the
// transaction fails, each attempt is recorded in a transaction of its own,
// and one refused alone is recorded without its answer's body.
func (d *DB) RecordWebhookAttempts(ctx context.Context, owner string, records []arbiter.WebhookRecord) (_ []arbiter.WebhookRecorded, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if len(records) > 1 {
		out, err := d.recordAttempts(ctx, owner, records)
		if err == nil || ctx.Err() != nil {
			return out, err
		}
	}
	out := make([]arbiter.WebhookRecorded, len(records))
	for i, rec := range records {
		one, err := d.recordAttempts(ctx, owner, records[i:i+1])
		if a := &rec.Step.Attempt; err != nil && ctx.Err() == nil && a.ResponseBody != "" {
			a.ResponseBody = ""
			if a.Error == "" {
				a.Error = "The answer's body could not be stored."
			}
			one, err = d.recordAttempts(ctx, owner, []arbiter.WebhookRecord{rec})
		}
		if err != nil {
			// A store that cannot be reached is EUNAVAILABLE here too,
			// so that the deliverer sends the record again.
			out[i].Err = d.unavailable(err)
			continue
		}
		out[i] = one[0]
	}
	return out, nil
}

// recordAttempts records the attempts in one transaction, as
// RecordWebhookAttempts describes; an error means none was recorded.
func (d *DB) recordAttempts(ctx context.Context, owner string, records []arbiter.WebhookRecord) (_ []arbiter.WebhookRecorded, err error) {
	var stmts [4]*sql.Stmt
	for i, q := range []string{recordMessageSQL, insertWebhookAttemptSQL, endpointDeliveredSQL, recordManySQL} {
		if q == recordManySQL && !d.takesArrays() {
			continue
		}
		if stmts[i], err = d.stmt(ctx, q); err != nil {
			return nil, err
		}
	}
	out := make([]arbiter.WebhookRecorded, len(records))
	err = d.transact(ctx, func(tx *Tx) error {
		for i := range out {
			out[i] = arbiter.WebhookRecorded{}
		}
		// endpoints[i] is the endpoint of records[i]'s message, "" for a
		// callback; recorded[i] says whether the message was recorded.
		endpoints, recorded := make([]string, len(records)), make([]bool, len(records))
		if d.takesArrays() {
			if err := d.recordMany(ctx, tx.StmtContext(ctx, stmts[3]), owner, records, endpoints, recorded); err != nil {
				return err
			}
		} else {
			update, insert := tx.StmtContext(ctx, stmts[0]), tx.StmtContext(ctx, stmts[1])
			for i, rec := range records {
				endpoint, err := recordMessage(ctx, update, insert, owner, rec)
				if err == errMessageLeaseLost {
					continue
				} else if err != nil {
					return err
				}
				endpoints[i], recorded[i] = endpoint, true
			}
		}
		delivered := tx.StmtContext(ctx, stmts[2])
		successes := map[string]int{}
		for i, rec := range records {
			switch {
			case !recorded[i]:
				out[i].Err = errMessageLeaseLost
			case endpoints[i] == "":
			case rec.Step.Attempt.Succeeded():
				if successes[endpoints[i]] == 0 {
					if _, err := delivered.ExecContext(ctx, endpoints[i]); err != nil {
						return fmt.Errorf("record endpoint delivery: %w", err)
					}
				}
				successes[endpoints[i]]++
			default:
				disabled, err := d.recordEndpointFailure(ctx, tx, endpoints[i], rec.Step)
				if err != nil {
					return err
				}
				out[i].Disabled = disabled
			}
		}
		// In one order, so that two batches never wait on each other.
		for _, e := range slices.Sorted(maps.Keys(successes)) {
			if _, err := tx.ExecContext(ctx, d.rebind(bringForwardSQL), e, int64(d.nowMS()),
				successes[e]*arbiter.WebhookCatchUp); err != nil {
				return fmt.Errorf("bring waiting webhook messages forward: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// bringForwardSQL makes an endpoint's first messages waiting for a retry
// (first in the schedule's order) due now, as many as its last argument
// says: a delivery to the endpoint succeeded, so the receiver is back and
// need not wait for the schedule. Each is due from its creation, so the
// claim, which takes the earliest due first, sends them oldest first. A
// message last answered 429 keeps its schedule: the receiver asked for
// fewer requests, and its Retry-After is honoured. Arguments: the
// endpoint, now, how many.
const bringForwardSQL = `UPDATE webhook_messages SET next_attempt_at = created_at
	WHERE id IN (SELECT id FROM webhook_messages WHERE endpoint_id = ? AND status = 'pending' AND next_attempt_at > ?
		AND last_status_code <> 429 ORDER BY next_attempt_at LIMIT ?)`

// recordManySQL records a batch of attempts on Postgres in one statement:
// each message owner still leases moves on, and gets its attempt; it
// returns the messages it moved and their endpoints. Arguments are arrays,
// one element per attempt in input's column order, then the owner.
const recordManySQL = `WITH input AS MATERIALIZED (
		SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::int[], ?::bigint[], ?::text[], ?::text[])
		AS i (id, status, next_attempt_at, attempted_at, status_code, latency_ms, response_body, error)
	), u AS (
		UPDATE webhook_messages m SET status = i.status, attempts = m.attempts + 1, next_attempt_at = i.next_attempt_at,
			lease_owner = NULL, lease_expires_at = NULL, last_attempt_at = i.attempted_at, last_status_code = i.status_code
		FROM input i WHERE m.id = i.id AND m.lease_owner = ? AND m.status = 'pending'
		RETURNING m.id, m.endpoint_id
	), a AS (
		INSERT INTO webhook_attempts (message_id, attempted_at, status_code, latency_ms, response_body, error)
		SELECT i.id, i.attempted_at, i.status_code, i.latency_ms, i.response_body, i.error FROM input i JOIN u ON u.id = i.id
	)
	SELECT u.id, u.endpoint_id FROM u`

// recordMany runs recordManySQL over records, through stmt, and sets
// endpoints and recorded for each record it moved. A message named twice
// in one batch (a lease lost and claimed again) is recorded once.
func (d *DB) recordMany(ctx context.Context, stmt *sql.Stmt, owner string, records []arbiter.WebhookRecord, endpoints []string, recorded []bool) error {
	n := len(records)
	ids, statuses, bodies, errs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	next, at, latencies, codes := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	first := make(map[string]int, n)
	for i, rec := range records {
		a := rec.Step.Attempt
		if _, dup := first[rec.MessageID]; dup {
			ids[i] = "" // matches no message
		} else {
			first[rec.MessageID], ids[i] = i, rec.MessageID
		}
		statuses[i], next[i], at[i] = rec.Step.Status, int64(rec.Step.NextAttemptAt), int64(a.AttemptedAt)
		codes[i], latencies[i], bodies[i], errs[i] = int64(a.StatusCode), a.Latency.Milliseconds(), a.ResponseBody, a.Error
	}
	rows, err := stmt.QueryContext(ctx, pq.Array(ids), pq.Array(statuses), pq.Array(next), pq.Array(at),
		pq.Array(codes), pq.Array(latencies), pq.Array(bodies), pq.Array(errs), owner)
	if err != nil {
		return fmt.Errorf("record webhook attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var endpoint sql.NullString
		if err := rows.Scan(&id, &endpoint); err != nil {
			return fmt.Errorf("record webhook attempts: %w", err)
		}
		i := first[id]
		endpoints[i], recorded[i] = endpoint.String, true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("record webhook attempts: %w", err)
	}
	return nil
}

// recordMessage moves one message on and records its attempt, through the
// prepared statements update and insert, and returns its endpoint ("" for
// a callback).
func recordMessage(ctx context.Context, update, insert *sql.Stmt, owner string, rec arbiter.WebhookRecord) (string, error) {
	step, a := rec.Step, rec.Step.Attempt
	var endpointID sql.NullString
	err := update.QueryRowContext(ctx, step.Status, int64(step.NextAttemptAt), int64(a.AttemptedAt), a.StatusCode,
		rec.MessageID, owner).Scan(&endpointID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errMessageLeaseLost
	} else if err != nil {
		return "", fmt.Errorf("record webhook attempt: %w", err)
	}
	if _, err := insert.ExecContext(ctx, rec.MessageID, int64(a.AttemptedAt), a.StatusCode, a.Latency.Milliseconds(),
		a.ResponseBody, a.Error); err != nil {
		return "", fmt.Errorf("insert webhook attempt: %w", err)
	}
	return endpointID.String, nil
}

// recordEndpointFailure notes a failed attempt on the endpoint inside tx:
// the start of its failures, and its disabling when step says so or it has
// failed for arbiter.WebhookFailingLimit, with the mail that tells its
// account's address written to the mail outbox. It returns the endpoint
// when this attempt disabled it.
func (d *DB) recordEndpointFailure(ctx context.Context, tx *Tx, endpointID string, step arbiter.WebhookStep) (*arbiter.DisabledWebhookEndpoint, error) {
	a := step.Attempt
	var since int64
	var state string
	if err := tx.QueryRowContext(ctx, d.rebind(`UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, ?)
		WHERE id = ? RETURNING failing_since, disabled`), int64(a.AttemptedAt), endpointID).Scan(&since, &state); err != nil {
		return nil, fmt.Errorf("record endpoint failure: %w", err)
	}
	reason := step.DisableEndpoint
	if reason == "" && arbiter.EndpointFailingTooLong((*arbiter.Timestamp)(&since), a.AttemptedAt.Time()) {
		reason = arbiter.WebhookDisabledFailing
	}
	if reason == "" || state != "" {
		return nil, nil
	}
	var r endpointRow
	if err := tx.GetContext(ctx, &r, d.rebind(`UPDATE webhook_endpoints SET disabled = ? WHERE id = ?
		RETURNING `+endpointColumns), reason, endpointID); err != nil {
		return nil, fmt.Errorf("disable endpoint: %w", err)
	}
	if err := d.holdMessages(ctx, tx, endpointID); err != nil {
		return nil, err
	}
	e, err := r.endpoint(d.secrets)
	if err != nil {
		return nil, err
	}
	if err := d.mailEndpointDisabled(ctx, tx, e); err != nil {
		return nil, err
	}
	return &arbiter.DisabledWebhookEndpoint{Endpoint: e}, nil
}

// mailEndpointDisabled writes, in tx, the mail that tells the endpoint's
// account that it was disabled, and why, to the account's address.
func (d *DB) mailEndpointDisabled(ctx context.Context, tx *Tx, e *arbiter.WebhookEndpoint) error {
	var email string
	if err := tx.GetContext(ctx, &email, d.rebind(`SELECT email FROM accounts WHERE id = ?`), e.AccountID); err != nil {
		return fmt.Errorf("find the endpoint's account: %w", err)
	}
	m, err := arbiter.NewMail(arbiter.MailWebhookDisabled, e.AccountID, email, "",
		arbiter.WebhookDisabledMail{EndpointID: e.ID, URL: e.URL, Reason: e.Disabled})
	if err != nil {
		return err
	}
	return outboxOf[*mailOutbox](d).write(ctx, tx, []*arbiter.MailMessage{m})
}

// ReleaseWebhookMessages ends the leases owner still holds, for a worker
// that stops with messages unsent.
func (d *DB) ReleaseWebhookMessages(ctx context.Context, owner string) (err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if _, err := d.db.ExecContext(ctx, d.releaseLeasesSQL("webhook_messages"), owner); err != nil {
		return fmt.Errorf("release webhook messages: %w", err)
	}
	return nil
}

// PruneWebhookMessages deletes up to max delivered, failed or held
// messages created before before, and their attempts, in one transaction.
func (d *DB) PruneWebhookMessages(ctx context.Context, before arbiter.Timestamp, max int) (_ int, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var ids []string
	err = d.transact(ctx, func(tx *Tx) error {
		if err := tx.SelectContext(ctx, &ids, d.rebind(`SELECT id FROM webhook_messages
			WHERE status <> 'pending' AND created_at < ? ORDER BY created_at LIMIT ?`), int64(before), max); err != nil {
			return fmt.Errorf("find old webhook messages: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		for _, q := range []string{`DELETE FROM webhook_attempts WHERE message_id IN (?)`, `DELETE FROM webhook_messages WHERE id IN (?)`} {
			if _, err := d.execIn(ctx, tx, q, ids); err != nil {
				return fmt.Errorf("prune webhook messages: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(ids), nil
}
