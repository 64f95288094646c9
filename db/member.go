package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.MemberService = (*DB)(nil)

// findPerson looks a person up by a unique column, "id" or "email".
func (d *DB) findPerson(ctx context.Context, q sqlx.QueryerContext, column, value string) (*arbiter.Person, error) {
	var p arbiter.Person
	err := q.QueryRowxContext(ctx, d.rebind(`SELECT id, email, created_at FROM people WHERE `+column+` = ?`), value).
		Scan(&p.ID, &p.Email, &p.CreatedAt)
	if err != nil {
		return nil, notFound(err, "Person not found.")
	}
	return &p, nil
}

// findOrCreatePerson returns the person with the (normalized) address,
// creating them when absent.
func (d *DB) findOrCreatePerson(ctx context.Context, tx *Tx, email string, now int64) (*arbiter.Person, error) {
	if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO people (id, email, created_at) VALUES (?, ?, ?)
		ON CONFLICT (email) DO NOTHING`), arbiter.NewPersonID(), email, now); err != nil {
		return nil, fmt.Errorf("insert person: %w", err)
	}
	return d.findPerson(ctx, tx, "email", email)
}

// insertMembership makes the person a member of the account with the role.
func (d *DB) insertMembership(ctx context.Context, tx *Tx, accountID, personID, role string, now int64) error {
	if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO memberships (account_id, person_id, role, created_at)
		VALUES (?, ?, ?, ?)`), accountID, personID, role, now); err != nil {
		return fmt.Errorf("insert membership: %w", err)
	}
	return nil
}

// roleIn returns the person's role in the account, or "" when they are not
// a member.
func (d *DB) roleIn(ctx context.Context, q sqlx.QueryerContext, accountID, personID string) (string, error) {
	var role string
	err := q.QueryRowxContext(ctx, d.rebind(`SELECT role FROM memberships WHERE account_id = ? AND person_id = ?`),
		accountID, personID).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("find membership: %w", err)
	}
	return role, nil
}

// authorize returns nil when the actor may do the action in the account,
// by their role there read inside tx, and arbiter.ErrNotAllowed otherwise.
// The operator (no person) may do everything. It returns the actor's role
// ("" for the operator).
func (d *DB) authorize(ctx context.Context, tx *Tx, accountID string, by arbiter.Actor, action arbiter.Action) (string, error) {
	if by.PersonID == "" {
		return "", nil
	}
	role, err := d.roleIn(ctx, tx, accountID, by.PersonID)
	if err != nil {
		return "", err
	}
	if !arbiter.Can(role, action) {
		return "", arbiter.ErrNotAllowed
	}
	return role, nil
}

// lockAccount serializes the changes to an account's members on Postgres,
// so two owners demoting each other at once cannot leave it without one.
// SQLite's single writer serializes them already.
func (d *DB) lockAccount(ctx context.Context, tx *Tx, accountID string) error {
	if !d.locksRows() {
		return nil
	}
	var id string
	err := tx.QueryRowContext(ctx, `SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, accountID).Scan(&id)
	return notFound(err, "Account not found.")
}

// ListMembers returns the account's members, owners first.
func (d *DB) ListMembers(ctx context.Context, accountID string) (_ []*arbiter.Membership, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT m.account_id, a.email, m.person_id, p.email, m.role, m.created_at
		FROM memberships m JOIN people p ON p.id = m.person_id JOIN accounts a ON a.id = m.account_id
		WHERE m.account_id = ?
		ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, p.email
		LIMIT ?`), accountID, arbiter.MaxMemberships)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	return scanMemberships(rows)
}

// scanMemberships reads rows of account_id, account name, person_id,
// e-mail, role and created_at.
func scanMemberships(rows *sql.Rows) ([]*arbiter.Membership, error) {
	defer rows.Close()
	list := []*arbiter.Membership{}
	for rows.Next() {
		var m arbiter.Membership
		if err := rows.Scan(&m.AccountID, &m.AccountName, &m.PersonID, &m.Email, &m.Role, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("scan membership: %w", err)
		}
		list = append(list, &m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list memberships: %w", err)
	}
	return list, nil
}

// memberChange checks, inside tx, that the actor may move the member from
// their role to the role to ("" removes them), and that the account keeps
// an owner. It returns the member's e-mail and current role.
func (d *DB) memberChange(ctx context.Context, tx *Tx, accountID, personID, to string, by arbiter.Actor) (email, from string, err error) {
	if err := d.lockAccount(ctx, tx, accountID); err != nil {
		return "", "", err
	}
	actorRole, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManageMembers)
	if err != nil {
		return "", "", err
	}
	err = tx.QueryRowContext(ctx, d.rebind(`SELECT p.email, m.role FROM memberships m JOIN people p ON p.id = m.person_id
		WHERE m.account_id = ? AND m.person_id = ?`), accountID, personID).Scan(&email, &from)
	if err != nil {
		return "", "", notFound(err, arbiter.ErrNotAllowed.Message)
	}
	if by.PersonID != "" {
		if err := arbiter.CheckMemberChange(actorRole, from, to); err != nil {
			return "", "", err
		}
	} else if to != "" {
		if err := arbiter.CheckRole(to); err != nil {
			return "", "", err
		}
	}
	if from == arbiter.RoleOwner && to != arbiter.RoleOwner {
		var owners int
		if err := tx.QueryRowContext(ctx, d.rebind(`SELECT count(*) FROM memberships WHERE account_id = ? AND role = ?`),
			accountID, arbiter.RoleOwner).Scan(&owners); err != nil {
			return "", "", fmt.Errorf("count owners: %w", err)
		}
		if owners <= 1 {
			return "", "", arbiter.ErrLastOwner
		}
	}
	return email, from, nil
}

// ChangeRole gives the member the role, checked as MemberService says,
// records it in the audit log, and revokes the pending invitations the
// member may no longer send.
func (d *DB) ChangeRole(ctx context.Context, accountID, personID, role string, by arbiter.Actor) (revoked int, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	err = d.transact(ctx, func(tx *Tx) error {
		revoked = 0
		email, from, err := d.memberChange(ctx, tx, accountID, personID, role, by)
		if err != nil {
			return err
		}
		if from == role {
			return nil
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE memberships SET role = ? WHERE account_id = ? AND person_id = ?`),
			role, accountID, personID); err != nil {
			return fmt.Errorf("change role: %w", err)
		}
		if err := d.insertAuditEvent(ctx, tx, memberAuditEvent(accountID, arbiter.AuditRoleChanged, by,
			email+": "+arbiter.RoleLabel(from)+" → "+arbiter.RoleLabel(role))); err != nil {
			return err
		}
		revoked, err = d.revokeInvitationsOf(ctx, tx, accountID, email, role, by,
			"their role changed to "+arbiter.RoleLabel(role))
		return err
	})
	return revoked, err
}

// RemoveMember ends the membership, checked as MemberService says, and
// revokes the pending invitations the member sent; sessions that had the
// account lose it at their next request, since each reads the membership.
func (d *DB) RemoveMember(ctx context.Context, accountID, personID string, by arbiter.Actor) (revoked int, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	err = d.transact(ctx, func(tx *Tx) error {
		revoked = 0
		email, from, err := d.memberChange(ctx, tx, accountID, personID, "", by)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM memberships WHERE account_id = ? AND person_id = ?`),
			accountID, personID); err != nil {
			return fmt.Errorf("remove member: %w", err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET reserved_by = NULL, reserved_until = NULL
			WHERE account_id = ? AND reserved_by = ? AND status = ?`), accountID, personID, arbiter.StatusHumanNeeded); err != nil {
			return fmt.Errorf("release reservations: %w", err)
		}
		if err := d.insertAuditEvent(ctx, tx, memberAuditEvent(accountID, arbiter.AuditMemberRemoved, by,
			email+" ("+arbiter.RoleLabel(from)+")")); err != nil {
			return err
		}
		revoked, err = d.revokeInvitationsOf(ctx, tx, accountID, email, "", by, "they were removed")
		return err
	})
	return revoked, err
}

// revokeInvitationsOf revokes, inside tx, the account's pending
// invitations that inviter (an e-mail, as invitations record who sent
// them) may no longer send now that their role is role ("" once removed),
// by arbiter.InviterMayStillInvite, and records each in the audit log with
// why. It returns how many it revoked.
func (d *DB) revokeInvitationsOf(ctx context.Context, tx *Tx, accountID, inviter, role string, by arbiter.Actor, why string) (int, error) {
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT id, email, role FROM invitations
		WHERE account_id = ? AND invited_by = ? AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > ?
		ORDER BY created_at, id`), accountID, inviter, int64(d.nowMS()))
	if err != nil {
		return 0, fmt.Errorf("list the member's invitations: %w", err)
	}
	type pending struct{ id, email, role string }
	var revoke []pending
	for rows.Next() {
		var p pending
		if err := rows.Scan(&p.id, &p.email, &p.role); err != nil {
			rows.Close()
			return 0, fmt.Errorf("scan invitation: %w", err)
		}
		if !arbiter.InviterMayStillInvite(inviter, role, p.role) {
			revoke = append(revoke, p)
		}
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("list the member's invitations: %w", err)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("list the member's invitations: %w", err)
	}
	for _, p := range revoke {
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE invitations SET revoked_at = ? WHERE id = ?`),
			int64(d.nowMS()), p.id); err != nil {
			return 0, fmt.Errorf("revoke invitation: %w", err)
		}
		if err := d.insertAuditEvent(ctx, tx, memberAuditEvent(accountID, arbiter.AuditInvitationRevoked, by,
			p.email+" as "+arbiter.RoleLabel(p.role)+", sent by "+inviter+": "+why)); err != nil {
			return 0, err
		}
	}
	return len(revoke), nil
}

// memberAuditEvent returns an audit event of the members' kind.
func memberAuditEvent(accountID, kind string, by arbiter.Actor, detail string) *arbiter.AuditEvent {
	actor := by.Email
	if actor == "" {
		actor = arbiter.OperatorActor
	}
	return &arbiter.AuditEvent{AccountID: accountID, Kind: kind, Actor: actor, Detail: detail,
		ClientIP: by.Client.IP, UserAgent: by.Client.UserAgent}
}

const invitationColumns = `i.id, i.account_id, a.email, i.email, i.role, i.invited_by, i.created_at, i.expires_at`

// scanInvitation reads a row of invitationColumns.
func scanInvitation(row interface{ Scan(...any) error }) (*arbiter.Invitation, error) {
	var inv arbiter.Invitation
	if err := row.Scan(&inv.ID, &inv.AccountID, &inv.AccountName, &inv.Email, &inv.Role, &inv.InvitedBy, &inv.CreatedAt, &inv.ExpiresAt); err != nil {
		return nil, err
	}
	return &inv, nil
}

// CreateInvitation stores the hash of a fresh invitation token and returns
// the invitation and the token, checked as MemberService says.
func (d *DB) CreateInvitation(ctx context.Context, accountID, email, role string, by arbiter.Actor) (_ *arbiter.Invitation, _ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	email, err = arbiter.NormalizeEmail(email)
	if err != nil {
		return nil, "", err
	}
	if err := arbiter.CheckSignInEmail(email); err != nil {
		return nil, "", arbiter.Errorf(arbiter.EINVALID, "Nobody can be invited with the demo account's address.")
	}
	if err := arbiter.CheckEmailDomain(email, d.allowDotlessEmail); err != nil {
		return nil, "", err
	}
	if err := arbiter.CheckRole(role); err != nil {
		return nil, "", err
	}
	token := arbiter.NewSecretToken()
	now := d.nowMS()
	inv := &arbiter.Invitation{ID: arbiter.NewInvitationID(), AccountID: accountID, Email: email, Role: role,
		InvitedBy: by.Email, CreatedAt: now, ExpiresAt: now + arbiter.Timestamp(arbiter.InvitationTTL.Milliseconds())}
	if inv.InvitedBy == "" {
		inv.InvitedBy = arbiter.OperatorActor
	}
	err = d.transact(ctx, func(tx *Tx) error {
		a, err := d.findAccount(ctx, tx, "id", accountID)
		if err != nil {
			return err
		}
		inv.AccountName = a.Email
		actorRole, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManageMembers)
		if err != nil {
			return err
		}
		if by.PersonID != "" {
			if err := arbiter.CheckMemberChange(actorRole, "", role); err != nil {
				return err
			}
		}
		var members int
		if err := tx.QueryRowContext(ctx, d.rebind(`SELECT count(*) FROM memberships m JOIN people p ON p.id = m.person_id
			WHERE m.account_id = ? AND p.email = ?`), accountID, email).Scan(&members); err != nil {
			return fmt.Errorf("find member: %w", err)
		}
		if members > 0 {
			return arbiter.Errorf(arbiter.ECONFLICT, "%s is a member already; change their role in the list instead.", email)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO invitations (id, account_id, email, role, hash, invited_by, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), inv.ID, inv.AccountID, inv.Email, inv.Role, arbiter.HashToken(token),
			inv.InvitedBy, int64(inv.CreatedAt), int64(inv.ExpiresAt)); err != nil {
			return fmt.Errorf("insert invitation: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, memberAuditEvent(accountID, arbiter.AuditMemberInvited, by,
			email+" as "+arbiter.RoleLabel(role)))
	})
	if err != nil {
		return nil, "", err
	}
	return inv, token, nil
}

// ListInvitations returns the account's pending invitations, newest first.
func (d *DB) ListInvitations(ctx context.Context, accountID string) (_ []*arbiter.Invitation, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT `+invitationColumns+`
		FROM invitations i JOIN accounts a ON a.id = i.account_id
		WHERE i.account_id = ? AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > ?
		ORDER BY i.created_at DESC, i.id LIMIT ?`), accountID, int64(d.nowMS()), arbiter.MaxMemberships)
	if err != nil {
		return nil, fmt.Errorf("list invitations: %w", err)
	}
	defer rows.Close()
	list := []*arbiter.Invitation{}
	for rows.Next() {
		inv, err := scanInvitation(rows)
		if err != nil {
			return nil, fmt.Errorf("scan invitation: %w", err)
		}
		list = append(list, inv)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list invitations: %w", err)
	}
	return list, nil
}

// RevokeInvitation withdraws a pending invitation of the account.
func (d *DB) RevokeInvitation(ctx context.Context, accountID, invitationID string, by arbiter.Actor) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	return d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManageMembers); err != nil {
			return err
		}
		var email, role string
		err := tx.QueryRowContext(ctx, d.rebind(`UPDATE invitations SET revoked_at = ?
			WHERE id = ? AND account_id = ? AND accepted_at IS NULL AND revoked_at IS NULL RETURNING email, role`),
			int64(d.nowMS()), invitationID, accountID).Scan(&email, &role)
		if err != nil {
			return notFound(err, "Invitation not found: it may have been used or revoked already.")
		}
		return d.insertAuditEvent(ctx, tx, memberAuditEvent(accountID, arbiter.AuditInvitationRevoked, by,
			email+" as "+arbiter.RoleLabel(role)))
	})
}

// FindInvitationByToken returns the pending invitation of a link.
func (d *DB) FindInvitationByToken(ctx context.Context, token string) (_ *arbiter.Invitation, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	inv, err := scanInvitation(d.db.QueryRowContext(ctx, d.rebind(`SELECT `+invitationColumns+`
		FROM invitations i JOIN accounts a ON a.id = i.account_id
		WHERE i.hash = ? AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > ?`),
		arbiter.HashToken(token), int64(d.nowMS())))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, arbiter.ErrInvitationInvalid
	} else if err != nil {
		return nil, fmt.Errorf("find invitation: %w", err)
	}
	return inv, nil
}

// MembershipOfUsedInvitation returns the person's membership of the
// account a used invitation link joined.
func (d *DB) MembershipOfUsedInvitation(ctx context.Context, token, personID string) (_ *arbiter.Membership, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var m arbiter.Membership
	var created int64
	err = d.db.QueryRowContext(ctx, d.rebind(`SELECT m.account_id, a.email, m.role, m.created_at
		FROM invitations i JOIN accounts a ON a.id = i.account_id
		JOIN memberships m ON m.account_id = i.account_id AND m.person_id = ?
		WHERE i.hash = ? AND i.accepted_at IS NOT NULL`), personID, arbiter.HashToken(token)).
		Scan(&m.AccountID, &m.AccountName, &m.Role, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, arbiter.ErrInvitationInvalid
	} else if err != nil {
		return nil, fmt.Errorf("find the membership of a used invitation: %w", err)
	}
	m.PersonID, m.CreatedAt = personID, arbiter.Timestamp(created)
	return &m, nil
}

// AcceptInvitation uses the link up and makes the person a member, in one
// transaction: the update that marks the invitation used is the one that
// succeeds once.
func (d *DB) AcceptInvitation(ctx context.Context, token, personID string, client arbiter.Client) (_ *arbiter.Membership, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var m *arbiter.Membership
	err = d.transact(ctx, func(tx *Tx) error {
		now := int64(d.nowMS())
		inv, err := scanInvitation(tx.QueryRowContext(ctx, d.rebind(`SELECT `+invitationColumns+`
			FROM invitations i JOIN accounts a ON a.id = i.account_id
			WHERE i.hash = ? AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > ?`),
			arbiter.HashToken(token), now))
		if errors.Is(err, sql.ErrNoRows) {
			return arbiter.ErrInvitationInvalid
		} else if err != nil {
			return fmt.Errorf("find invitation: %w", err)
		}
		p, err := d.findPerson(ctx, tx, "id", personID)
		if err != nil {
			return err
		}
		addresses, err := d.verifiedAddresses(ctx, tx, p)
		if err != nil {
			return err
		}
		if err := arbiter.CheckInvitee(inv, addresses); err != nil {
			return err
		}
		if ok, err := d.inviterMayStillInvite(ctx, tx, inv); err != nil {
			return err
		} else if !ok {
			return arbiter.ErrInvitationInvalid
		}
		if role, err := d.roleIn(ctx, tx, inv.AccountID, p.ID); err != nil {
			return err
		} else if role != "" {
			return arbiter.Errorf(arbiter.ECONFLICT, "You are a member of %s already, as %s.", inv.AccountName, arbiter.RoleLabel(role))
		}
		res, err := tx.ExecContext(ctx, d.rebind(`UPDATE invitations SET accepted_at = ? WHERE id = ? AND accepted_at IS NULL AND revoked_at IS NULL`), now, inv.ID)
		if err != nil {
			return fmt.Errorf("accept invitation: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("accept invitation: %w", err)
		} else if n != 1 {
			return arbiter.ErrInvitationInvalid
		}
		if err := d.insertMembership(ctx, tx, inv.AccountID, p.ID, inv.Role, now); err != nil {
			return err
		}
		m = &arbiter.Membership{AccountID: inv.AccountID, AccountName: inv.AccountName, PersonID: p.ID, Email: p.Email,
			Role: inv.Role, CreatedAt: arbiter.Timestamp(now)}
		return d.insertAuditEvent(ctx, tx, &arbiter.AuditEvent{AccountID: inv.AccountID, Kind: arbiter.AuditMemberJoined,
			Actor: p.Email, Detail: "as " + arbiter.RoleLabel(inv.Role) + ", invited by " + inv.InvitedBy,
			ClientIP: client.IP, UserAgent: client.UserAgent})
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// inviterMayStillInvite reports, inside tx, whether the invitation's
// sender may still invite for its role, by their role in the account now
// (arbiter.InviterMayStillInvite).
func (d *DB) inviterMayStillInvite(ctx context.Context, tx *Tx, inv *arbiter.Invitation) (bool, error) {
	var role string
	if inv.InvitedBy != arbiter.OperatorActor {
		err := tx.QueryRowContext(ctx, d.rebind(`SELECT m.role FROM memberships m JOIN people p ON p.id = m.person_id
			WHERE m.account_id = ? AND p.email = ?`), inv.AccountID, inv.InvitedBy).Scan(&role)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("find the inviter: %w", err)
		}
	}
	return arbiter.InviterMayStillInvite(inv.InvitedBy, role, inv.Role), nil
}

// verifiedAddresses returns the addresses the person signed in with: their
// own and their identities', each verified when it was linked.
func (d *DB) verifiedAddresses(ctx context.Context, tx *Tx, p *arbiter.Person) ([]string, error) {
	addresses := []string{p.Email}
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT email FROM identities WHERE person_id = ? LIMIT ?`), p.ID, arbiter.MaxMemberships)
	if err != nil {
		return nil, fmt.Errorf("list identities: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e string
		if err := rows.Scan(&e); err != nil {
			return nil, fmt.Errorf("scan identity: %w", err)
		}
		addresses = append(addresses, e)
	}
	return addresses, rows.Err()
}

// memberByEmail returns, with q (the pool or a transaction), the account's
// member who signs in with the address (their own or an identity's, both
// verified), or ENOTFOUND.
func (d *DB) memberByEmail(ctx context.Context, q sqlx.QueryerContext, accountID, email string) (*arbiter.Membership, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	var m arbiter.Membership
	err := q.QueryRowxContext(ctx, d.rebind(`SELECT m.account_id, m.person_id, p.email, m.role FROM memberships m
		JOIN people p ON p.id = m.person_id
		WHERE m.account_id = ? AND (p.email = ? OR EXISTS (SELECT 1 FROM identities i WHERE i.person_id = p.id AND i.email = ?))
		ORDER BY m.person_id LIMIT 1`), accountID, email, email).Scan(&m.AccountID, &m.PersonID, &m.Email, &m.Role)
	if err != nil {
		return nil, notFound(err, "Nobody in this account signs in with that address.")
	}
	return &m, nil
}

// checkRungsTellMembers returns arbiter.RungOutsideAccount for the first
// "email:" rung whose address is no member's of the account, read with q
// (the pool or a transaction): a rung mails the account's members only.
func (d *DB) checkRungsTellMembers(ctx context.Context, q sqlx.QueryerContext, accountID string, rungs []arbiter.Rung) error {
	for i, r := range rungs {
		email, ok := r.Email()
		if !ok {
			continue
		}
		if _, err := d.memberByEmail(ctx, q, accountID, email); arbiter.ErrorCode(err) == arbiter.ENOTFOUND {
			return arbiter.RungOutsideAccount(i+1, email)
		} else if err != nil {
			return err
		}
	}
	return nil
}
