package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// The admin commands' output is a contract scripts depend on: see
// docs/operations.md.

// runCreateKey runs `arbiter admin create-key`.
func runCreateKey(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	email := fs.String("email", "", "the account's e-mail address")
	name := fs.String("name", "default", "a name for the key")
	return adminRun(ctx, c, p, fs, args, func(store *db.DB) error {
		account, err := store.FindOrCreateAccountByEmail(ctx, *email)
		if err != nil {
			return err
		}
		_, plaintext, err := store.CreateAPIKey(ctx, account.ID, *name, arbiter.Actor{Email: arbiter.OperatorActor})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(p.stdout, plaintext)
		return err
	})
}

// runListKeys runs `arbiter admin list-keys`.
func runListKeys(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	email := fs.String("email", "", "the account's e-mail address")
	return adminRun(ctx, c, p, fs, args, func(store *db.DB) error {
		account, err := store.FindAccountByEmail(ctx, *email)
		if err != nil {
			return err
		}
		keys, err := store.ListAPIKeys(ctx, account.ID)
		if err != nil {
			return err
		}
		return writeKeys(p.stdout, keys)
	})
}

// runRevokeKey runs `arbiter admin revoke-key`.
func runRevokeKey(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	id := fs.String("id", "", "the key's id (key_…)")
	return adminRun(ctx, c, p, fs, args, func(store *db.DB) error {
		if *id == "" {
			return fmt.Errorf("--id is required")
		}
		_, err := store.RevokeAPIKey(ctx, "", *id, arbiter.Actor{Email: arbiter.OperatorActor})
		return err
	})
}

// runSetCap runs `arbiter admin set-cap`.
func runSetCap(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	email := fs.String("email", "", "the account's e-mail address")
	capFlag := fs.String("cap", "", "the daily task cap, or \"default\" for ARBITER_DAILY_TASK_CAP")
	return adminRun(ctx, c, p, fs, args, func(store *db.DB) error {
		cap, err := parseCap(*capFlag)
		if err != nil {
			return err
		}
		account, err := store.FindAccountByEmail(ctx, *email)
		if err != nil {
			return err
		}
		return store.SetDailyCap(ctx, account.ID, cap)
	})
}

// runResealSecrets runs `arbiter admin reseal-secrets`: every stored
// secret sealed under the first key of ARBITER_SECRET_KEY, after a key was
// first set or a new one put first.
func runResealSecrets(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	return adminRun(ctx, c, p, fs, args, func(store *db.DB) error {
		if !store.SecretsSealed() {
			return fmt.Errorf("ARBITER_SECRET_KEY is not set: there is no key to seal under")
		}
		r, err := store.ResealSecrets(ctx)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.stdout, "%d\n", r.Resealed)
		return err
	})
}

// resealSecrets brings the stored secrets under the sealing key when one is
// configured, and warns when secrets are kept in plaintext; it refuses to
// start over secrets sealed under a key it does not hold.
func resealSecrets(ctx context.Context, store *db.DB, logger *slog.Logger) error {
	r, err := store.ResealSecrets(ctx)
	if err != nil {
		return err
	}
	if r.Resealed > 0 {
		logger.Info("stored secrets sealed under the first key of ARBITER_SECRET_KEY", "resealed", r.Resealed)
	}
	if r.Plaintext > 0 {
		logger.Warn("webhook secrets are stored in plaintext; set ARBITER_SECRET_KEY to seal them (Slack needs it)", "secrets", r.Plaintext)
	}
	return nil
}

// adminRun parses an admin command's flags, opens the store and does the
// command's work on it.
func adminRun(ctx context.Context, c *command, p *process, fs *flag.FlagSet, args []string, do func(*db.DB) error) error {
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	s, err := newStoreServer(ctx, p.getenv)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := do(s.store); err != nil {
		return adminError(c.name, err)
	}
	return nil
}

// adminError is what an admin command prints when it fails: the sentence of
// a domain error, and the whole chain of any other, since the operator
// needs the cause.
func adminError(command string, err error) error {
	if arbiter.ErrorCode(err) == arbiter.EINTERNAL {
		return fmt.Errorf("%s: %w", command, err)
	}
	return fmt.Errorf("%s: %s", command, arbiter.ErrorMessage(err))
}

// writeKeys prints one tab-separated line per key: id, name, prefix,
// created_at, last_used_at, revoked_at, times in RFC 3339 UTC and "-" for
// none.
func writeKeys(w io.Writer, keys []*arbiter.APIKey) error {
	for _, k := range keys {
		if _, err := fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix,
			rfc3339(&k.CreatedAt), rfc3339(k.LastUsedAt), rfc3339(k.RevokedAt)); err != nil {
			return err
		}
	}
	return nil
}

func rfc3339(ts *arbiter.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.Time().Format(time.RFC3339)
}

// parseCap reads --cap: a cap arbiter.CheckDailyCap accepts, or "default"
// for none.
func parseCap(s string) (*int, error) {
	if s == "default" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || arbiter.CheckDailyCap(n) != nil {
		return nil, fmt.Errorf("--cap must be a whole number from 0 to %d or \"default\", not %q", arbiter.MaxDailyTaskCap, s)
	}
	return &n, nil
}
