package db

import (
	"context"
	"fmt"
	"strings"

	"github.com/arbiterhq/arbiter/internal/secretbox"
)

// Secrets at rest.
//
// With a keyring (Options.Secrets, from ARBITER_SECRET_KEY) every secret
// the store keeps is written sealed (internal/secretbox), bound to its row
// by the row's id; without one, webhook secrets are written in plaintext
// as before, and Slack is refused. Reads open sealed values and pass
// plaintext through, so rows written before a key was configured keep
// working until ResealSecrets seals them.

// sealedColumns lists every column that holds a secret, with the column
// whose value binds it to its row.
var sealedColumns = []struct {
	table, key string
	columns    []string
}{
	{"webhook_endpoints", "id", []string{"secret", "previous_secret"}},
	{"webhook_callback_secrets", "account_id", []string{"secret", "previous_secret"}},
	{"slack_connections", "account_id", []string{"bot_token", "app_token", "signing_secret"}},
	{"mail_messages", "id", []string{"data"}},
	{"teams_connections", "account_id", []string{"client_secret"}},
	{"receipt_keys", "id", []string{"private_key"}},
}

// SecretsReport counts what ResealSecrets found.
type SecretsReport struct {
	// Resealed is how many values it sealed under the sealing key.
	Resealed int
	// Plaintext is how many values are stored in plaintext, without a
	// keyring.
	Plaintext int
	// SealedWithoutKey is how many values are sealed while the store has
	// no keyring to open them.
	SealedWithoutKey int
}

// seal returns plain sealed for the row aad under the sealing key, or
// plain itself when the store has no keyring.
func (d *DB) seal(plain, aad string) (string, error) {
	if d.secrets == nil || plain == "" {
		return plain, nil
	}
	return d.secrets.Seal(plain, aad)
}

// SecretsSealed reports whether the store seals secrets at rest.
func (d *DB) SecretsSealed() bool { return d.secrets != nil }

// ResealSecrets brings every stored secret under the keyring's sealing
// key: plaintext rows (written before a key was configured) and rows
// sealed under an older key are sealed again, each table in one
// transaction. It returns how many values it changed. Without a keyring it
// changes nothing and returns how many values are stored in plaintext,
// and an error when some are sealed: they cannot be read without the key.
func (d *DB) ResealSecrets(ctx context.Context) (_ SecretsReport, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var report SecretsReport
	for _, t := range sealedColumns {
		err := d.transact(ctx, func(tx *Tx) error {
			rows, err := tx.QueryxContext(ctx, `SELECT `+t.key+`, `+strings.Join(t.columns, ", ")+` FROM `+t.table)
			if err != nil {
				return fmt.Errorf("read %s: %w", t.table, err)
			}
			type change struct {
				key    string
				values []string
			}
			var changes []change
			err = func() error {
				defer rows.Close()
				for rows.Next() {
					vals := make([]string, 1+len(t.columns))
					ptrs := make([]any, len(vals))
					for i := range vals {
						ptrs[i] = &vals[i]
					}
					if err := rows.Scan(ptrs...); err != nil {
						return err
					}
					c := change{key: vals[0]}
					changed := false
					for _, v := range vals[1:] {
						switch {
						case v == "":
						case d.secrets == nil && secretbox.IsSealed(v):
							report.SealedWithoutKey++
						case d.secrets == nil:
							report.Plaintext++
						default:
							nv, ch, err := d.secrets.Reseal(v, c.key)
							if err != nil {
								return fmt.Errorf("%s %s: %w", t.table, c.key, err)
							}
							changed = changed || ch
							if ch {
								report.Resealed++
							}
							v = nv
						}
						c.values = append(c.values, v)
					}
					if changed {
						changes = append(changes, c)
					}
				}
				return rows.Err()
			}()
			if err != nil {
				return err
			}
			set := strings.Join(t.columns, " = ?, ") + " = ?"
			for _, c := range changes {
				args := make([]any, 0, len(c.values)+1)
				for _, v := range c.values {
					args = append(args, v)
				}
				args = append(args, c.key)
				if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE `+t.table+` SET `+set+` WHERE `+t.key+` = ?`), args...); err != nil {
					return fmt.Errorf("reseal %s: %w", t.table, err)
				}
			}
			return nil
		})
		if err != nil {
			return report, err
		}
	}
	if report.SealedWithoutKey > 0 {
		return report, fmt.Errorf("%d stored secrets are sealed, and ARBITER_SECRET_KEY is not set: set it to the key they were sealed under", report.SealedWithoutKey)
	}
	return report, nil
}
