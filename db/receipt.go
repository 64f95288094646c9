package db

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
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

// Receipts (migration 00042): each final decision is signed in the
// transaction that makes it (signReceipts), chained per account. The key
// that signs is the receipt_keys row without retired_at (the newest, should
// two processes have made the first key at once); its private half is
// sealed under the secrets keyring (sealedColumns), or plaintext without
// one, as webhook secrets are. Opened keys are kept in memory by id, and
// each process reads which one signs at most once per signerTTL.

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

// signReceipts signs the decisions inside tx, for publishDecided, which
// calls it between the outboxes' reads and their writes (so that the
// events' copies of the task carry the receipt, tx.receipts, and the
// chain's lock waits on no read), in order for each account: the signing
// key first, then it locks each account's chain
// (accounts in order, so that two transactions never wait on each other's),
// writes each receipt with the next seq and the hash of the one before,
// and moves the chain on. It returns the receipts by task id.
//
// A decision costs two statements, both prepared: the lock, which reads
// the chain's head, and the write of the receipts with the chains' new
// heads (storeReceipts); the signing key is read once per signerTTL.
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
	lock, err := tx.stmt(ctx, lockChainSQL)
	if err != nil {
		return nil, err
	}
	heads := make([]chainHead, len(accounts))
	for i, acct := range accounts {
		// The upsert takes the chain's row lock on Postgres until the
		// transaction ends; SQLite's one writer orders chains already.
		heads[i].accountID = acct
		if err := lock.QueryRowContext(ctx, acct).Scan(&heads[i].seq, &heads[i].last); err != nil {
			return nil, fmt.Errorf("lock receipt chain: %w", err)
		}
	}
	out := make(map[string]string, len(decisions))
	rows := make([]receiptRow, 0, len(decisions))
	for _, dec := range decisions {
		h := &heads[slices.Index(accounts, dec.accountID)]
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
		rows = append(rows, receiptRow{taskID: dec.taskID, accountID: dec.accountID, seq: h.seq, receipt: receipt, at: int64(dec.at)})
		h.last = arbiter.ReceiptHash(receipt)
		out[dec.taskID] = receipt
	}
	if err := tx.storeReceipts(ctx, rows, heads); err != nil {
		return nil, err
	}
	if tx.receipts == nil {
		tx.receipts = make(map[string]string, len(out))
	}
	maps.Copy(tx.receipts, out)
	return out, nil
}

// lockChainSQL locks an account's receipt chain, making it when it is new,
// and returns its head: the last seq and the hash of that receipt.
const lockChainSQL = `INSERT INTO receipt_chains (account_id, seq, last_hash) VALUES (?, 0, '')
	ON CONFLICT (account_id) DO UPDATE SET seq = receipt_chains.seq RETURNING seq, last_hash`

// chainHead is an account's receipt chain's last seq and the hash of that
// receipt.
type chainHead struct {
	accountID string
	seq       int64
	last      string
}

// receiptRow is a signed receipt to store.
type receiptRow struct {
	taskID, accountID string
	seq               int64
	receipt           string
	at                int64
}

// storeReceiptsSQL stores receipts and moves their chains to their new
// heads in one statement, from arrays: the receipts' task ids, accounts,
// seqs, receipts and decision times, then the chains' accounts, seqs and
// last hashes.
const storeReceiptsSQL = `WITH stored AS (
		INSERT INTO receipts (task_id, account_id, seq, receipt, decided_at)
		SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], ?::text[], ?::bigint[])
	)
	UPDATE receipt_chains c SET seq = h.seq, last_hash = h.last_hash
	FROM unnest(?::text[], ?::bigint[], ?::text[]) AS h (account_id, seq, last_hash)
	WHERE c.account_id = h.account_id`

// storeReceipts stores the receipts and moves the chains to their heads:
// one prepared statement on Postgres (storeReceiptsSQL); on SQLite, whose
// statements cost no round trip, the receipts a statement per
// receiptsPerInsert and a statement a chain.
func (tx *Tx) storeReceipts(ctx context.Context, rows []receiptRow, heads []chainHead) error {
	d := tx.db
	if d.takesArrays() {
		stmt, err := tx.stmt(ctx, storeReceiptsSQL)
		if err != nil {
			return err
		}
		n := len(rows)
		tasks, accounts, seqs, receipts, ats := make([]string, n), make([]string, n), make([]int64, n), make([]string, n), make([]int64, n)
		for i, r := range rows {
			tasks[i], accounts[i], seqs[i], receipts[i], ats[i] = r.taskID, r.accountID, r.seq, r.receipt, r.at
		}
		chains, chainSeqs, lasts := make([]string, len(heads)), make([]int64, len(heads)), make([]string, len(heads))
		for i, h := range heads {
			chains[i], chainSeqs[i], lasts[i] = h.accountID, h.seq, h.last
		}
		if _, err := stmt.ExecContext(ctx, pq.Array(tasks), pq.Array(accounts), pq.Array(seqs),
			pq.Array(receipts), pq.Array(ats), pq.Array(chains), pq.Array(chainSeqs), pq.Array(lasts)); err != nil {
			return fmt.Errorf("store receipts: %w", err)
		}
		return nil
	}
	for start := 0; start < len(rows); start += receiptsPerInsert {
		chunk := rows[start:min(start+receiptsPerInsert, len(rows))]
		values := strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", len(chunk)), ", ")
		args := make([]any, 0, 5*len(chunk))
		for _, r := range chunk {
			args = append(args, r.taskID, r.accountID, r.seq, r.receipt, r.at)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO receipts (task_id, account_id, seq, receipt, decided_at) VALUES `+values),
			args...); err != nil {
			return fmt.Errorf("store receipts: %w", err)
		}
	}
	for _, h := range heads {
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE receipt_chains SET seq = ?, last_hash = ? WHERE account_id = ?`),
			h.seq, h.last, h.accountID); err != nil {
			return fmt.Errorf("move receipt chain: %w", err)
		}
	}
	return nil
}

// receiptsPerInsert bounds the receipts one INSERT stores on SQLite (5
// parameters each): a grouped finish of a thousand tasks stores its
// receipts in ten statements, not a thousand.
const receiptsPerInsert = 100

// signerTTL bounds how long a process signs with the key it read last
// without reading it again. A rotation switches the rotating process at
// once and every other process within signerTTL; what a just-retired key
// signed meanwhile verifies, as the JWKS keeps retired keys.
const signerTTL = 5 * time.Second

// signer is a signing key as read at a time.
type signer struct {
	key arbiter.ReceiptKey
	// until is when the key must be read again.
	until arbiter.Timestamp
}

// signingKey returns the key that signs now, making the first one when
// there is none: the key this process read within signerTTL, else the
// newest one not retired. A key made here is not kept until a later read
// finds it, as its transaction may roll back.
func (d *DB) signingKey(ctx context.Context, tx *Tx) (arbiter.ReceiptKey, error) {
	kept := d.signer.Load()
	if kept != nil && tx.now < kept.until {
		return kept.key, nil
	}
	var id, sealed string
	err := tx.QueryRowContext(ctx, `SELECT id, private_key FROM receipt_keys WHERE retired_at IS NULL
		ORDER BY created_at DESC, id DESC LIMIT 1`).Scan(&id, &sealed)
	if err == nil {
		k, err := d.openReceiptKey(id, sealed)
		if err == nil {
			// Unless a rotation here replaced the key meanwhile.
			d.signer.CompareAndSwap(kept, &signer{key: k, until: tx.now + arbiter.Timestamp(signerTTL.Milliseconds())})
		}
		return k, err
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
// signs from now on in this process and within signerTTL in every other
// (each keeps the key it read that long). The retired keys stay in the
// JWKS.
func (d *DB) RotateReceiptKey(ctx context.Context) (_ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var id string
	var key arbiter.ReceiptKey
	err = d.transact(ctx, func(tx *Tx) error {
		now := int64(d.nowMS())
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE receipt_keys SET retired_at = ? WHERE retired_at IS NULL`), now); err != nil {
			return fmt.Errorf("retire receipt keys: %w", err)
		}
		k, err := d.newReceiptKey(ctx, tx)
		key, id = k, k.ID
		return err
	})
	if err == nil {
		d.signer.Store(&signer{key: key, until: d.nowMS() + arbiter.Timestamp(signerTTL.Milliseconds())})
	}
	return id, err
}
