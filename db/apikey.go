package db

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/arbiterhq/arbiter"
	"github.com/jmoiron/sqlx"
)

var _ arbiter.APIKeyService = (*DB)(nil)

const apiKeyColumns = `id, account_id, name, prefix, hash, created_at, last_used_at, revoked_at`

// CreateAPIKey creates a key for the account and returns it with its
// plaintext, which is stored nowhere, and records its creation by the actor
// in the account's audit log in the same transaction. Returns EINVALID for a
// bad name and ENOTFOUND for an unknown account.
func (d *DB) CreateAPIKey(ctx context.Context, accountID, name string, by arbiter.Actor) (_ *arbiter.APIKey, _ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	name, err = arbiter.NormalizeKeyName(name)
	if err != nil {
		return nil, "", err
	}
	plaintext := arbiter.NewAPIKeyPlaintext()
	k := &arbiter.APIKey{
		ID:        arbiter.NewAPIKeyID(),
		AccountID: accountID,
		Name:      name,
		Prefix:    arbiter.APIKeyDisplayPrefix(plaintext),
		Hash:      arbiter.HashToken(plaintext),
		CreatedAt: d.nowMS(),
	}
	err = d.transact(ctx, func(tx *Tx) error {
		if _, err := d.findAccount(ctx, tx, "id", accountID); err != nil {
			return err
		}
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManageKeys); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`), k.ID, k.AccountID, k.Name, k.Prefix, k.Hash, int64(k.CreatedAt))
		if err != nil {
			return fmt.Errorf("insert api key: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewKeyAuditEvent(arbiter.AuditKeyCreated, by, k))
	})
	if err != nil {
		return nil, "", err
	}
	return k, plaintext, nil
}

// FindAPIKeyByHash returns the key with the hash, revoked or not, or ENOTFOUND.
func (d *DB) FindAPIKeyByHash(ctx context.Context, hash string) (_ *arbiter.APIKey, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	k, err := scanAPIKey(d.db.QueryRowContext(ctx, d.rebind(`SELECT `+apiKeyColumns+` FROM api_keys WHERE hash = ?`), hash))
	return k, notFound(err, "API key not found.")
}

// keysFoundAtOnce bounds the hashes a statement of FindAPIKeysByHash asks
// for; more take one statement per keysFoundAtOnce.
const keysFoundAtOnce = 500

// FindAPIKeysByHash returns the keys with the hashes, revoked or not; a
// hash no key has is left out.
func (d *DB) FindAPIKeysByHash(ctx context.Context, hashes []string) (_ []*arbiter.APIKey, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	keys := make([]*arbiter.APIKey, 0, len(hashes))
	for batch := range slices.Chunk(hashes, keysFoundAtOnce) {
		query, args, err := sqlx.In(`SELECT `+apiKeyColumns+` FROM api_keys WHERE hash IN (?)`, batch)
		if err != nil {
			return nil, fmt.Errorf("find api keys: %w", err)
		}
		rows, err := d.db.QueryContext(ctx, d.rebind(query), args...)
		if err != nil {
			return nil, fmt.Errorf("find api keys: %w", err)
		}
		for rows.Next() {
			k, err := scanAPIKey(rows)
			if err != nil {
				rows.Close()
				return nil, err
			}
			keys = append(keys, k)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("find api keys: %w", err)
		}
	}
	return keys, nil
}

// FindAPIKeyByID returns the key with the id, or ENOTFOUND.
func (d *DB) FindAPIKeyByID(ctx context.Context, id string) (_ *arbiter.APIKey, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	k, err := scanAPIKey(d.db.QueryRowContext(ctx, d.rebind(`SELECT `+apiKeyColumns+` FROM api_keys WHERE id = ?`), id))
	return k, notFound(err, "API key not found.")
}

// ListAPIKeys returns the account's keys, revoked ones included, newest first.
func (d *DB) ListAPIKeys(ctx context.Context, accountID string) (_ []*arbiter.APIKey, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT `+apiKeyColumns+` FROM api_keys
		WHERE account_id = ? ORDER BY created_at DESC, id`), accountID)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	keys := []*arbiter.APIKey{}
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// RevokeAPIKey revokes a key of the account ("" for any account) and
// records it in the account's audit log in the same transaction. Returns
// ENOTFOUND for an unknown or foreign key, ECONFLICT if already revoked.
func (d *DB) RevokeAPIKey(ctx context.Context, accountID, keyID string, by arbiter.Actor) (_ *arbiter.APIKey, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var k *arbiter.APIKey
	err = d.transact(ctx, func(tx *Tx) error {
		var err error
		k, err = scanAPIKey(tx.QueryRowContext(ctx, d.rebind(`SELECT `+apiKeyColumns+` FROM api_keys WHERE id = ?`), keyID))
		if err != nil {
			return fmt.Errorf("find api key: %w", notFound(err, "API key not found."))
		} else if accountID != "" && k.AccountID != accountID {
			return arbiter.Errorf(arbiter.ENOTFOUND, "API key not found.")
		} else if _, err := d.authorize(ctx, tx, k.AccountID, by, arbiter.ActionManageKeys); err != nil {
			return err
		} else if !k.Active() {
			return arbiter.Errorf(arbiter.ECONFLICT, "The API key is already revoked.")
		}
		now := d.nowMS()
		k.RevokedAt = &now
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE api_keys SET revoked_at = ? WHERE id = ?`), int64(now), keyID); err != nil {
			return fmt.Errorf("revoke api key: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewKeyAuditEvent(arbiter.AuditKeyRevoked, by, k))
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// TouchAPIKeys records coalesced last-use times; a time never moves back.
func (d *DB) TouchAPIKeys(ctx context.Context, lastUsed map[string]arbiter.Timestamp) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if len(lastUsed) == 0 {
		return nil
	}
	return d.transact(ctx, func(tx *Tx) error {
		stmt, err := tx.PrepareContext(ctx, d.rebind(`UPDATE api_keys SET last_used_at = ?
			WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`))
		if err != nil {
			return fmt.Errorf("touch api keys: %w", err)
		}
		defer stmt.Close()
		for id, ts := range lastUsed {
			if _, err := stmt.ExecContext(ctx, int64(ts), id, int64(ts)); err != nil {
				return fmt.Errorf("touch api key %s: %w", id, err)
			}
		}
		return nil
	})
}

// scanAPIKey reads one row of apiKeyColumns.
func scanAPIKey(row interface{ Scan(...any) error }) (*arbiter.APIKey, error) {
	var (
		k                 arbiter.APIKey
		lastUsed, revoked sql.NullInt64
	)
	if err := row.Scan(&k.ID, &k.AccountID, &k.Name, &k.Prefix, &k.Hash, &k.CreatedAt, &lastUsed, &revoked); err != nil {
		return nil, err
	}
	k.LastUsedAt = nullTimestamp(lastUsed)
	k.RevokedAt = nullTimestamp(revoked)
	return &k, nil
}
