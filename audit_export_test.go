package arbiter_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// exportFixture writes an export of account acc_1: two decisions (one
// with an edited action), one event, signed by a fixed key.
func exportFixture(t *testing.T) ([]byte, arbiter.JWKS) {
	t.Helper()
	key := arbiter.ReceiptKeyOf(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)))
	keys := arbiter.JWKS{Keys: []arbiter.JWK{key.Public()}}
	p := mustAction(t, refundAction)
	edited, err := p.Approve(p.Proposed(), []byte(`{"amount": 80, "currency": "EUR", "note": "late", "order": "o-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	var chain arbiter.AuditChain
	exported := arbiter.Timestamp(1763805700000)
	if err := chain.Write(&buf, arbiter.AuditLine{Kind: arbiter.AuditLineExport, Account: "acc_1", Format: arbiter.AuditExportFormat,
		ExportedAt: &exported, Keys: &keys}); err != nil {
		t.Fatal(err)
	}
	var prev *string
	for i, a := range []*arbiter.ApprovedAction{&edited, nil} {
		at := arbiter.Timestamp(1763805600000 + int64(i)*1000)
		var digest *string
		if a != nil {
			digest = &a.Digest
		}
		c := arbiter.ReceiptClaims{TaskID: fmt.Sprintf("tsk_%016x", i+1), Account: "acc_1", Verdict: "approve", Tier: arbiter.TierHuman,
			DecidedBy: "per_1", ActionDigest: digest, DecidedAt: at, Seq: int64(i + 1), Prev: prev}
		receipt, err := arbiter.SignReceipt(key, c)
		if err != nil {
			t.Fatal(err)
		}
		h := arbiter.ReceiptHash(receipt)
		prev = &h
		if err := chain.Write(&buf, arbiter.AuditLine{Kind: arbiter.AuditLineDecision, At: &at, Decision: &arbiter.AuditDecision{
			TaskID: c.TaskID, Seq: c.Seq, Verdict: c.Verdict, Tier: c.Tier, DecidedBy: c.DecidedBy, Action: a, Receipt: receipt}}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			evAt := at + 500
			if err := chain.Write(&buf, arbiter.AuditLine{Kind: arbiter.AuditLineEvent, At: &evAt, Event: &arbiter.AuditEventLine{
				ID: 9, Kind: arbiter.AuditSignIn, Actor: "ann@example.com", Detail: "email", ClientIP: "192.0.2.1"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := chain.End(&buf, key); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), keys
}

func TestVerifyAuditExport_AWholeExport(t *testing.T) {
	export, keys := exportFixture(t)
	rep, err := arbiter.VerifyAuditExport(bytes.NewReader(export), &keys)
	if err != nil {
		t.Fatalf("VerifyAuditExport: %v\n%s", err, export)
	}
	if rep.Account != "acc_1" || rep.Lines != 5 || rep.Decisions != 2 || rep.Events != 1 || rep.KeysFromExport {
		t.Errorf("report = %+v", rep)
	}
	if rep, err := arbiter.VerifyAuditExport(bytes.NewReader(export), nil); err != nil || !rep.KeysFromExport {
		t.Errorf("with the export's own keys: %+v, %v", rep, err)
	}
}

// TestVerifyAuditExport_FindsEveryChangedByte changes each byte of the
// export in turn (to another printable character) and checks that the
// verification fails at that line or, when the change leaves the line
// valid JSON of its kind, at the next one, which names its hash.
func TestVerifyAuditExport_FindsEveryChangedByte(t *testing.T) {
	export, keys := exportFixture(t)
	lineOf := func(i int) int64 { return int64(bytes.Count(export[:i], []byte("\n")) + 1) }
	for i := range export {
		if export[i] == '\n' {
			continue
		}
		changed := bytes.Clone(export)
		changed[i] = 'x'
		if export[i] == 'x' {
			changed[i] = 'y'
		}
		_, err := arbiter.VerifyAuditExport(bytes.NewReader(changed), &keys)
		var b *arbiter.AuditBreak
		if !errors.As(err, &b) {
			t.Fatalf("byte %d changed: %v, want a break", i, err)
		}
		if line := lineOf(i); b.Line != line && b.Line != line+1 {
			t.Errorf("byte %d (line %d) changed: the break is at line %d (%s)", i, line, b.Line, b.Reason)
		}
	}
}

func TestVerifyAuditExport_Breaks(t *testing.T) {
	export, keys := exportFixture(t)
	lines := strings.SplitAfter(string(export), "\n")
	lines = lines[:len(lines)-1] // the empty string after the last newline
	join := func(ls ...string) string { return strings.Join(ls, "") }
	other := arbiter.ReceiptKeyOf(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32)))
	for _, c := range []struct {
		name   string
		export string
		keys   *arbiter.JWKS
		line   int64
		reason string
	}{
		{"a line removed", join(lines[0], lines[2], lines[3], lines[4]), &keys, 2, "removed"},
		{"two lines swapped", join(lines[0], lines[2], lines[1], lines[3], lines[4]), &keys, 2, "removed or moved"},
		{"cut short", join(lines[:4]...), &keys, 4, "cut short"},
		{"empty", "", &keys, 1, "empty"},
		{"a line after the end", join(append(lines, lines[2])...), &keys, 6, "follows the end"},
		{"signed by another key", string(export), &arbiter.JWKS{Keys: []arbiter.JWK{other.Public()}}, 2, "does not verify"},
		{"not JSON", join(lines[0], "{\n"), &keys, 2, "not a line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := arbiter.VerifyAuditExport(strings.NewReader(c.export), c.keys)
			var b *arbiter.AuditBreak
			if !errors.As(err, &b) || b.Line != c.line || !strings.Contains(b.Reason, c.reason) {
				t.Errorf("VerifyAuditExport = %v, want line %d: …%s…", err, c.line, c.reason)
			}
		})
	}
}

func TestParseAuditExportQuery(t *testing.T) {
	day := arbiter.TimestampOf(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC))
	for _, c := range []struct {
		query string
		want  arbiter.Timestamp
		field string // "" when valid; "-" for an error about no one field
	}{
		{"", 0, ""},
		{"since=1782864000", day, ""},
		{"since=1782864000.5", day + 500, ""},
		{"since=2026-07-01", day, ""},
		{"since=2026-07-01T02:00:00%2B02:00", day, ""},
		{"since=yesterday", 0, "since"},
		{"since=-5", 0, "since"},
		{"since=1&since=2", 0, "since"},
		{"until=5", 0, "-"},
	} {
		q, _ := url.ParseQuery(c.query)
		got, err := arbiter.ParseAuditExportQuery(q)
		switch {
		case c.field == "" && (err != nil || got != c.want):
			t.Errorf("%q = %v, %v; want %v", c.query, got, err, c.want)
		case c.field == "-" && (arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorField(err) != ""):
			t.Errorf("%q error = %v", c.query, err)
		case c.field != "" && c.field != "-" && arbiter.ErrorField(err) != c.field:
			t.Errorf("%q error = %v, want one about %s", c.query, err, c.field)
		}
	}
}
