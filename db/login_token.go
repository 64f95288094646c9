package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.LoginTokenService = (*DB)(nil)

// CreateLoginToken stores the hash of a fresh sign-in token for the address
// and returns the token; expired tokens are swept on the way.
// Returns EINVALID for a malformed address or one arbiter.CheckEmailDomain
// refuses, and arbiter.ErrDemoSignIn for the demo account's.
func (d *DB) CreateLoginToken(ctx context.Context, email string) (_ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	email, err = arbiter.NormalizeEmail(email)
	if err != nil {
		return "", err
	}
	if err := arbiter.CheckEmailDomain(email, d.allowDotlessEmail); err != nil {
		return "", err
	}
	if err := arbiter.CheckSignInEmail(email); err != nil {
		return "", err
	}
	token := arbiter.NewSecretToken()
	now := d.nowMS()
	if _, err := d.db.ExecContext(ctx, d.rebind(`DELETE FROM login_tokens WHERE expires_at <= ?`), int64(now)); err != nil {
		return "", fmt.Errorf("sweep login tokens: %w", err)
	}
	_, err = d.db.ExecContext(ctx, d.rebind(`INSERT INTO login_tokens (hash, email, created_at, expires_at) VALUES (?, ?, ?, ?)`),
		arbiter.HashToken(token), email, int64(now), int64(now)+arbiter.LoginTokenTTL.Milliseconds())
	if err != nil {
		return "", fmt.Errorf("insert login token: %w", err)
	}
	return token, nil
}

// CheckLoginToken reports whether the token is unused and unexpired, without
// using it, and returns its address. Returns arbiter.ErrLoginLinkInvalid
// otherwise.
func (d *DB) CheckLoginToken(ctx context.Context, token string) (_ string, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var email string
	err = d.db.QueryRowContext(ctx, d.rebind(`SELECT email FROM login_tokens
		WHERE hash = ? AND used_at IS NULL AND expires_at > ?`), arbiter.HashToken(token), int64(d.nowMS())).Scan(&email)
	if errors.Is(err, sql.ErrNoRows) {
		return "", arbiter.ErrLoginLinkInvalid
	} else if err != nil {
		return "", fmt.Errorf("check login token: %w", err)
	}
	return email, nil
}

// RedeemLoginToken marks the token used and returns its address, in one
// statement, so two concurrent redemptions cannot both succeed.
// Returns arbiter.ErrLoginLinkInvalid for an unknown, used or expired token.
func (d *DB) RedeemLoginToken(ctx context.Context, token string) (_ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	now := int64(d.nowMS())
	var email string
	err = d.db.QueryRowContext(ctx, d.rebind(`UPDATE login_tokens SET used_at = ?
		WHERE hash = ? AND used_at IS NULL AND expires_at > ? RETURNING email`), now, arbiter.HashToken(token), now).Scan(&email)
	if errors.Is(err, sql.ErrNoRows) {
		return "", arbiter.ErrLoginLinkInvalid
	} else if err != nil {
		return "", fmt.Errorf("redeem login token: %w", err)
	}
	return email, nil
}
