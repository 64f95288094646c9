package db

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

// Receipts (migration 00042): each final decision is signed in the
// transaction that makes it (signReceipts), chained per account. The key
// that signs is the receipt_keys row without retired_at (the newest, should
// two processes have made the first key at once); its private half is
// sealed under the secrets keyring (sealedColumns), or plaintext without
// one, as webhook secrets are. Opened keys are kept in memory by id.

var _ arbiter.ReceiptService = (*DB)(nil)

// decision is a final decision to sign: the receipt's claims but for
// its place in the chain.
type decision struct {
	taskID, accountID string
	verdict, tier     string
	decidedBy         string
	digest            *string
	at                arbiter.Timestamp
}

// decisionOf is the decision an attempt a made final on the account's
// task at at (its completed_at): its verdict is final (the gold verdict of a gold task, the
// consensus of a vote), decidedBy the person (their id, or their e-mail
// when the decision was made on the operator's behalf), "" for the agent
// and the on-expiry outcome, whom the attempt names.
func decisionOf(accountID, taskID, final string, at arbiter.Timestamp, a arbiter.Attempt, decidedBy string) decision {
	dec := decision{taskID: taskID, accountID: accountID, verdict: final, tier: a.Tier, decidedBy: decidedBy,
		digest: a.ActionDigest, at: at}
	switch {
	case a.Tier == arbiter.TierAgent:
		// The cascade's verifier when the attempt names one, else the
		// model that answered.
		verifier := "agent"
		if a.Verifier != nil && *a.Verifier != "" {
			verifier = *a.Verifier
		} else if a.Model != nil && *a.Model != "" {
			verifier = *a.Model
		}
		dec.decidedBy = arbiter.DecidedByAgent(verifier, a.Version)
	case a.Tier == arbiter.TierFallback:
		dec.decidedBy = arbiter.DecidedByFallback
	case dec.decidedBy == "" && a.Reviewer != nil:
		dec.decidedBy = "reviewer:" + *a.Reviewer
	}
	return dec
}

// signReceipts signs the decisions inside tx, before the transaction
// publishes them (so that the events' copies of the task carry the
// receipt), in order for each account: it locks each account's chain
// (accounts in order, so that two transactions never wait on each other's),
// writes each receipt with the next seq and the hash of the one before,
// and moves the chain on. It returns the receipts by task id.
func (tx *Tx) signReceipts(ctx context.Context, decisions ...decision) (map[string]string, error) {
	if len(decisions) == 0 {
		return nil, nil
	}
	d := tx.db
	key, err := d.signingKey(ctx, tx)
	if err != nil {
		return nil, err
	}
	accounts := make([]string, 0, 1)
	for _, dec := range decisions {
		if !slices.Contains(accounts, dec.accountID) {
			accounts = append(accounts, dec.accountID)
		}
	}
	slices.SortFunc(accounts, cmp.Compare)
	type head struct {
		seq  int64
		last string
	}
	heads := make(map[string]*head, len(accounts))
	for _, acct := range accounts {
		h := &head{}
		// The upsert takes the chain's row lock on Postgres until the
		// transaction ends; SQLite's one writer orders chains already.
		if err := tx.QueryRowContext(ctx, d.rebind(`INSERT INTO receipt_chains (account_id, seq, last_hash) VALUES (?, 0, '')
			ON CONFLICT (account_id) DO UPDATE SET seq = receipt_chains.seq RETURNING seq, last_hash`), acct).Scan(&h.seq, &h.last); err != nil {
			return nil, fmt.Errorf("lock receipt chain: %w", err)
		}
		heads[acct] = h
	}
	out := make(map[string]string, len(decisions))
	rows := make([]any, 0, 5*len(decisions))
	for _, dec := range decisions {
		h := heads[dec.accountID]
		h.seq++
		c := arbiter.ReceiptClaims{TaskID: dec.taskID, Account: dec.accountID, Verdict: dec.verdict, Tier: dec.tier,
			DecidedBy: dec.decidedBy, ActionDigest: dec.digest, DecidedAt: dec.at, Seq: h.seq}
		if h.last != "" {
			prev := h.last
			c.Prev = &prev
		}
		receipt, err := arbiter.SignReceipt(key, c)
		if err != nil {
			return nil, fmt.Errorf("sign receipt: %w", err)
		}
		rows = append(rows, dec.taskID, dec.accountID, h.seq, receipt, int64(dec.at))
		h.last = arbiter.ReceiptHash(receipt)
		out[dec.taskID] = receipt
	}
	if err := tx.insertReceipts(ctx, rows); err != nil {
		return nil, err
	}
	for _, acct := range accounts {
		h := heads[acct]
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE receipt_chains SET seq = ?, last_hash = ? WHERE account_id = ?`),
			h.seq, h.last, acct); err != nil {
			return nil, fmt.Errorf("move receipt chain: %w", err)
		}
	}
	return out, nil
}

// receiptsPerInsert bounds the receipts one INSERT stores (5 parameters
// each).
const receiptsPerInsert = 100

// insertReceipts stores receipts, rows holding five values each (task,
// account, seq, receipt, decided at), a statement per receiptsPerInsert:
// a grouped finish of a thousand tasks stores its receipts in ten
// statements, not a thousand.
func (tx *Tx) insertReceipts(ctx context.Context, rows []any) error {
	for start := 0; start < len(rows); start += 5 * receiptsPerInsert {
		chunk := rows[start:min(start+5*receiptsPerInsert, len(rows))]
		values := strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", len(chunk)/5), ", ")
		if _, err := tx.ExecContext(ctx, tx.db.rebind(`INSERT INTO receipts (task_id, account_id, seq, receipt, decided_at) VALUES `+values),
			chunk...); err != nil {
			return fmt.Errorf("store receipts: %w", err)
		}
	}
	return nil
}

// signingKey returns the key that signs now, making the first one when
// there is none.
func (d *DB) signingKey(ctx context.Context, tx *Tx) (arbiter.ReceiptKey, error) {
	var id, sealed string
	err := tx.QueryRowContext(ctx, `SELECT id, private_key FROM receipt_keys WHERE retired_at IS NULL
		ORDER BY created_at DESC, id DESC LIMIT 1`).Scan(&id, &sealed)
	if err == nil {
		return d.openReceiptKey(id, sealed)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return arbiter.ReceiptKey{}, fmt.Errorf("find receipt key: %w", err)
	}
	return d.newReceiptKey(ctx, tx)
}

// newReceiptKey makes a signing key and stores it, inside tx.
func (d *DB) newReceiptKey(ctx context.Context, tx *Tx) (arbiter.ReceiptKey, error) {
	k, err := arbiter.NewReceiptKey()
	if err != nil {
		return arbiter.ReceiptKey{}, err
	}
	k.CreatedAt = d.nowMS()
	sealed, err := d.seal(base64.StdEncoding.EncodeToString(k.Private.Seed()), k.ID)
	if err != nil {
		return arbiter.ReceiptKey{}, fmt.Errorf("seal receipt key: %w", err)
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO receipt_keys (id, private_key, public_key, created_at) VALUES (?, ?, ?, ?)`),
		k.ID, sealed, k.Public().X, int64(k.CreatedAt)); err != nil {
		return arbiter.ReceiptKey{}, fmt.Errorf("store receipt key: %w", err)
	}
	d.receiptKeys.Store(k.ID, k)
	return k, nil
}

// openReceiptKey returns the key id, kept in memory once opened.
func (d *DB) openReceiptKey(id, sealed string) (arbiter.ReceiptKey, error) {
	if k, ok := d.receiptKeys.Load(id); ok {
		return k.(arbiter.ReceiptKey), nil
	}
	plain := sealed
	if secretbox.IsSealed(sealed) {
		if d.secrets == nil {
			return arbiter.ReceiptKey{}, fmt.Errorf("the receipt key %s is sealed, and ARBITER_SECRET_KEY is not set", id)
		}
		var err error
		if plain, err = d.secrets.Open(sealed, id); err != nil {
			return arbiter.ReceiptKey{}, fmt.Errorf("open receipt key %s: %w", id, err)
		}
	}
	seed, err := base64.StdEncoding.DecodeString(plain)
	if err != nil || len(seed) != ed25519.SeedSize {
		return arbiter.ReceiptKey{}, fmt.Errorf("receipt key %s is not an Ed25519 seed", id)
	}
	k := arbiter.ReceiptKeyOf(ed25519.NewKeyFromSeed(seed))
	if k.ID != id {
		return arbiter.ReceiptKey{}, fmt.Errorf("receipt key %s holds the key %s", id, k.ID)
	}
	d.receiptKeys.Store(id, k)
	return k, nil
}

// ReceiptKeys returns the public keys of every receipt key, the one that
// signs first, then the retired ones, newest first; it makes the first
// key when there is none, so that the set is never empty.
func (d *DB) ReceiptKeys(ctx context.Context) (_ arbiter.JWKS, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	set, err := d.publicReceiptKeys(ctx, d.db)
	if err != nil || len(set.Keys) > 0 {
		return set, err
	}
	err = d.transact(ctx, func(tx *Tx) error {
		_, err := d.signingKey(ctx, tx)
		return err
	})
	if err != nil {
		return arbiter.JWKS{}, err
	}
	return d.publicReceiptKeys(ctx, d.db)
}

// publicReceiptKeys reads the JWKS.
func (d *DB) publicReceiptKeys(ctx context.Context, q sqlx.QueryerContext) (arbiter.JWKS, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, public_key FROM receipt_keys
		ORDER BY CASE WHEN retired_at IS NULL THEN 0 ELSE 1 END, created_at DESC, id DESC`)
	if err != nil {
		return arbiter.JWKS{}, fmt.Errorf("list receipt keys: %w", err)
	}
	defer rows.Close()
	set := arbiter.JWKS{Keys: []arbiter.JWK{}}
	for rows.Next() {
		var k arbiter.JWK
		if err := rows.Scan(&k.Kid, &k.X); err != nil {
			return arbiter.JWKS{}, fmt.Errorf("list receipt keys: %w", err)
		}
		k.Kty, k.Crv, k.Alg, k.Use = "OKP", "Ed25519", "EdDSA", "sig"
		set.Keys = append(set.Keys, k)
	}
	return set, rows.Err()
}

// RotateReceiptKey retires the keys that sign and makes a new one, which
// signs from now on in every process (each reads the signing key in the
// decision's transaction). The retired keys stay in the JWKS.
func (d *DB) RotateReceiptKey(ctx context.Context) (_ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var id string
	err = d.transact(ctx, func(tx *Tx) error {
		now := int64(d.nowMS())
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE receipt_keys SET retired_at = ? WHERE retired_at IS NULL`), now); err != nil {
			return fmt.Errorf("retire receipt keys: %w", err)
		}
		k, err := d.newReceiptKey(ctx, tx)
		id = k.ID
		return err
	})
	return id, err
}
