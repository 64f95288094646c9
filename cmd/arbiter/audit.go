package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// runRotateReceiptKey runs `arbiter admin rotate-receipt-key`: a new key
// signs receipts and exports from now on, in every process; the old ones
// stay published. It prints the new key's id.
func runRotateReceiptKey(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	return adminRun(ctx, c, p, fs, args, func(store *db.DB) error {
		id, err := store.RotateReceiptKey(ctx)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(p.stdout, id)
		return err
	})
}

// runExportAudit runs `arbiter admin export-audit`: an account's audit
// export, as GET /v1/audit/export answers it, to stdout or --out.
func runExportAudit(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	email := fs.String("email", "", "the account's e-mail address")
	since := fs.String("since", "", "start at this time: Unix epoch seconds or an RFC 3339 time or date (default: the beginning)")
	out := fs.String("out", "", "write the export to this file instead of stdout")
	return adminRun(ctx, c, p, fs, args, func(store *db.DB) error {
		from, err := arbiter.ParseAuditExportQuery(url.Values{"since": {*since}})
		if err != nil {
			return err
		}
		account, err := store.FindAccountByEmail(ctx, *email)
		if err != nil {
			return err
		}
		w := p.stdout
		if *out != "" {
			f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			defer f.Close()
			w = f
		}
		return store.ExportAudit(ctx, account.ID, from, w)
	})
}

// runAuditVerify runs `arbiter audit verify FILE`: it checks an export
// offline (arbiter.VerifyAuditExport) and prints what it holds, or the
// first break ("line N: why") and fails. Without --jwks it checks against
// the keys the export lists, and says so.
func runAuditVerify(_ context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	jwksPath := fs.String("jwks", "", "verify with the keys of this JWKS file (the server's /.well-known/arbiter/jwks.json) instead of those the export lists")
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	var keys *arbiter.JWKS
	if *jwksPath != "" {
		b, err := os.ReadFile(*jwksPath)
		if err != nil {
			return err
		}
		keys = new(arbiter.JWKS)
		if err := json.Unmarshal(b, keys); err != nil || len(keys.Keys) == 0 {
			return fmt.Errorf("arbiter %s: %s is not a JWKS with keys", c.name, *jwksPath)
		}
	}
	var in io.Reader = p.stdin
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	rep, err := arbiter.VerifyAuditExport(in, keys)
	if err != nil {
		return fmt.Errorf("arbiter %s: %s: %w", c.name, fs.Arg(0), err)
	}
	fmt.Fprintf(p.stdout, "ok: %d lines of %s: %d decisions with verified receipts, %d events, chained and signed\n",
		rep.Lines, rep.Account, rep.Decisions, rep.Events)
	if rep.KeysFromExport {
		fmt.Fprintln(p.stdout, "The keys came from the export itself; pass --jwks with the server's keys to know who signed it.")
	}
	return nil
}
