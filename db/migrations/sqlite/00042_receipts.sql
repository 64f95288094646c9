-- +goose Up
-- Receipts (issue 44): each final decision's compact JWS, signed in the
-- decision's transaction. An account's receipts form a chain: seq counts
-- them from 1 and each names the hash of the one before, which
-- receipt_chains keeps (its row, locked by the decision, orders them).
-- The signing keys are Ed25519, their private halves sealed like every
-- secret (ARBITER_SECRET_KEY); the key without retired_at signs, and
-- every key stays published (the JWKS) so that what it signed verifies.
-- The view tasks gains the receipt at its end. A decision link keeps the
-- digest of the action its mail showed, so that it decides that action
-- or nothing.
CREATE TABLE receipt_keys (
    id          TEXT PRIMARY KEY,
    private_key TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    retired_at  INTEGER
);
CREATE TABLE receipt_chains (
    account_id TEXT PRIMARY KEY,
    seq        INTEGER NOT NULL,
    last_hash  TEXT NOT NULL
);
CREATE TABLE receipts (
    task_id    TEXT PRIMARY KEY REFERENCES task_states (id),
    account_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    receipt    TEXT NOT NULL,
    decided_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX receipts_chain ON receipts (account_id, seq);
ALTER TABLE decision_links ADD COLUMN action_digest TEXT;
DROP VIEW tasks;
CREATE VIEW tasks AS
    SELECT s.id, s.account_id, s.status, s.task_type, s.source, s.touchpoint, b.prompt,
        b.allowed_verdicts, s.confidence_threshold, b.context, s.final_verdict, s.final_tier,
        s.final_confidence, s.created_at, s.completed_at, s.failures, s.run_after, s.lease_owner,
        s.lease_expires_at, s.deadline_at, s.expired_at, s.callback_url, s.audit_rate, s.audit_state,
        s.reserved_by, s.reserved_until, s.call_started_at, s.on_expiry, s.notify, b.display,
        s.review_rule, s.reviews_required, s.votes_open, s.alerts, s.alert_step, s.alert_at,
        s.escalated_at, s.escalation_rung,
        b.action, s.action_edit, s.approved_digest,
        s.final_verifier, s.cascade_stage,
        r.receipt
    FROM task_states s LEFT JOIN task_bodies b ON b.id = s.id LEFT JOIN receipts r ON r.task_id = s.id;

-- +goose Down
DROP VIEW tasks;
CREATE VIEW tasks AS
    SELECT s.id, s.account_id, s.status, s.task_type, s.source, s.touchpoint, b.prompt,
        b.allowed_verdicts, s.confidence_threshold, b.context, s.final_verdict, s.final_tier,
        s.final_confidence, s.created_at, s.completed_at, s.failures, s.run_after, s.lease_owner,
        s.lease_expires_at, s.deadline_at, s.expired_at, s.callback_url, s.audit_rate, s.audit_state,
        s.reserved_by, s.reserved_until, s.call_started_at, s.on_expiry, s.notify, b.display,
        s.review_rule, s.reviews_required, s.votes_open, s.alerts, s.alert_step, s.alert_at,
        s.escalated_at, s.escalation_rung,
        b.action, s.action_edit, s.approved_digest,
        s.final_verifier, s.cascade_stage
    FROM task_states s LEFT JOIN task_bodies b ON b.id = s.id;
ALTER TABLE decision_links DROP COLUMN action_digest;
DROP TABLE receipts;
DROP TABLE receipt_chains;
DROP TABLE receipt_keys;
