package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/web"
)

const adminUsage = `Usage:
  arbiter admin create-key --email E [--name N]
  arbiter admin list-keys --email E
  arbiter admin revoke-key --id ID
  arbiter admin set-cap --email E --cap N   (--cap default returns to the default cap)
`

// runAdmin runs an operator command. Its output is a contract scripts
// depend on: see README.md.
func runAdmin(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, adminUsage)
		return errUsage
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("admin "+sub, flag.ContinueOnError)
	email := fs.String("email", "", "the account's e-mail address")
	name := fs.String("name", "default", "a name for the key")
	id := fs.String("id", "", "the key's id (key_…)")
	capFlag := fs.String("cap", "", "the daily task cap, or \"default\"")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}

	var do func(*db.DB) error
	switch sub {
	case "create-key":
		do = func(store *db.DB) error {
			account, err := store.FindOrCreateAccountByEmail(ctx, *email)
			if err != nil {
				return err
			}
			_, plaintext, err := store.CreateAPIKey(ctx, account.ID, *name)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(stdout, plaintext)
			return err
		}
	case "list-keys":
		do = func(store *db.DB) error {
			account, err := store.FindAccountByEmail(ctx, *email)
			if err != nil {
				return err
			}
			keys, err := store.ListAPIKeys(ctx, account.ID)
			if err != nil {
				return err
			}
			return writeKeys(stdout, keys)
		}
	case "revoke-key":
		do = func(store *db.DB) error {
			if *id == "" {
				return fmt.Errorf("--id is required")
			}
			_, err := store.RevokeAPIKey(ctx, "", *id)
			return err
		}
	case "set-cap":
		do = func(store *db.DB) error {
			cap, err := parseCap(*capFlag)
			if err != nil {
				return err
			}
			account, err := store.FindAccountByEmail(ctx, *email)
			if err != nil {
				return err
			}
			return store.SetDailyCap(ctx, account.ID, cap)
		}
	default:
		fmt.Fprintf(stderr, "arbiter admin: unknown command %q\n\n%s", sub, adminUsage)
		return errUsage
	}

	store, err := openStore(ctx, getenv)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := do(store); err != nil {
		return fmt.Errorf("admin %s: %s", sub, arbiter.ErrorMessage(err))
	}
	return nil
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

// parseCap reads --cap: a whole number ≥ 0, or "default" for none.
func parseCap(s string) (*int, error) {
	if s == "default" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("--cap must be a whole number of at least 0 or \"default\", not %q", s)
	}
	return &n, nil
}

// openStore opens and migrates the store the environment names.
func openStore(ctx context.Context, getenv func(string) string) (*db.DB, error) {
	cfg, err := web.ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	store, err := db.Open(ctx, cfg.DatabaseURL, db.Options{DailyTaskCap: cfg.DailyTaskCap, MaxOpenConns: cfg.DatabaseMaxConns})
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}
