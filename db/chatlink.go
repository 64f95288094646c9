package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.ChatLinkService = (*DB)(nil)

// Chat links (arbiter's chatlink.go): chat_links holds the chat users
// linked to people, chat_link_offers the links shown to chat users, by
// the SHA-256 of their token.

// FindChatMember returns the account's member linked to the chat user.
func (d *DB) FindChatMember(ctx context.Context, accountID string, u arbiter.ChatUser) (_ *arbiter.Membership, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var m arbiter.Membership
	err = d.db.QueryRowxContext(ctx, d.rebind(`SELECT m.account_id, m.person_id, p.email, m.role FROM chat_links l
		JOIN memberships m ON m.person_id = l.person_id AND m.account_id = ?
		JOIN people p ON p.id = l.person_id
		WHERE l.provider = ? AND l.workspace = ? AND l.user_id = ?`), accountID, u.Provider, u.Workspace, u.UserID).
		Scan(&m.AccountID, &m.PersonID, &m.Email, &m.Role)
	if err != nil {
		return nil, notFound(err, "This chat user is not linked to a member of this account.")
	}
	return &m, nil
}

// OfferChatLink stores a new offer for the chat user, replacing the
// user's earlier ones and forgetting expired ones, when a member of the
// account signs in with u.Email, and returns its token.
func (d *DB) OfferChatLink(ctx context.Context, accountID string, u arbiter.ChatUser) (token string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	u.Email = strings.ToLower(strings.TrimSpace(u.Email))
	err = d.transact(ctx, func(tx *Tx) error {
		var n int
		if err := tx.GetContext(ctx, &n, d.rebind(`SELECT COUNT(*) FROM memberships m JOIN people p ON p.id = m.person_id
			WHERE m.account_id = ? AND (p.email = ? OR EXISTS (SELECT 1 FROM identities i WHERE i.person_id = p.id AND i.email = ?))`),
			accountID, u.Email, u.Email); err != nil {
			return fmt.Errorf("find the member: %w", err)
		}
		if n == 0 {
			return arbiter.Errorf(arbiter.ENOTFOUND, "Nobody in this account signs in with that address.")
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM chat_link_offers WHERE expires_at < ?
			OR (provider = ? AND workspace = ? AND user_id = ? AND used_at IS NULL)`),
			int64(tx.now), u.Provider, u.Workspace, u.UserID); err != nil {
			return fmt.Errorf("forget chat link offers: %w", err)
		}
		token = arbiter.NewSecretToken()
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO chat_link_offers (token_hash, account_id, provider, workspace,
			user_id, email, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
			arbiter.HashToken(token), accountID, u.Provider, u.Workspace, u.UserID, u.Email, int64(tx.now),
			int64(tx.now)+arbiter.ChatLinkTTL.Milliseconds()); err != nil {
			return fmt.Errorf("insert chat link offer: %w", err)
		}
		return nil
	})
	return token, err
}

// FindChatLinkOffer returns the offer of token while it can be used, to
// a person who signs in with its address.
func (d *DB) FindChatLinkOffer(ctx context.Context, token, personID string) (_ *arbiter.ChatLinkOffer, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.findChatLinkOffer(ctx, d.db, token, personID)
}

// queryRower is a database or a transaction, for one-row reads.
type queryRower interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// findChatLinkOffer returns the offer of token while it can be used, when
// the person signs in with its address (their own or an identity's).
func (d *DB) findChatLinkOffer(ctx context.Context, q queryRower, token, personID string) (*arbiter.ChatLinkOffer, error) {
	if len(token) != 64 {
		return nil, arbiter.ErrChatLinkInvalid
	}
	var o arbiter.ChatLinkOffer
	var expires int64
	err := q.QueryRowContext(ctx, d.rebind(`SELECT account_id, provider, workspace, user_id, email, expires_at
		FROM chat_link_offers WHERE token_hash = ? AND used_at IS NULL AND expires_at >= ?`),
		arbiter.HashToken(token), int64(d.nowMS())).
		Scan(&o.AccountID, &o.User.Provider, &o.User.Workspace, &o.User.UserID, &o.User.Email, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, arbiter.ErrChatLinkInvalid
	} else if err != nil {
		return nil, fmt.Errorf("find chat link offer: %w", err)
	}
	o.ExpiresAt = arbiter.Timestamp(expires)
	var owns int
	if err := q.QueryRowContext(ctx, d.rebind(`SELECT COUNT(*) FROM people p WHERE p.id = ?
		AND (p.email = ? OR EXISTS (SELECT 1 FROM identities i WHERE i.person_id = p.id AND i.email = ?))`),
		personID, o.User.Email, o.User.Email).Scan(&owns); err != nil {
		return nil, fmt.Errorf("find the person's addresses: %w", err)
	}
	if owns == 0 {
		return nil, arbiter.ChatLinkOther(o.User.Email)
	}
	return &o, nil
}

// LinkChatUser uses the offer up and links its chat user to by's
// person, in one transaction, with its line in the audit log.
func (d *DB) LinkChatUser(ctx context.Context, token string, by arbiter.Actor) (_ *arbiter.ChatLinkOffer, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var o *arbiter.ChatLinkOffer
	err = d.transact(ctx, func(tx *Tx) error {
		if o, err = d.findChatLinkOffer(ctx, tx, token, by.PersonID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, d.rebind(`UPDATE chat_link_offers SET used_at = ? WHERE token_hash = ? AND used_at IS NULL`),
			int64(tx.now), arbiter.HashToken(token))
		if err != nil {
			return fmt.Errorf("use chat link offer: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return arbiter.ErrChatLinkInvalid
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO chat_links (provider, workspace, user_id, person_id, linked_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (provider, workspace, user_id)
			DO UPDATE SET person_id = excluded.person_id, linked_at = excluded.linked_at`),
			o.User.Provider, o.User.Workspace, o.User.UserID, by.PersonID, int64(tx.now)); err != nil {
			return fmt.Errorf("link chat user: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewChatLinkAuditEvent(o.AccountID, o.User, by))
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}
