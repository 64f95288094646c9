package arbiter

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/jcs"
)

// The audit export is an account's record of decisions and administrative
// events as JSON Lines, one JSON object a line in canonical form (RFC
// 8785), hash-chained: every line names the hash of the line before it
// ("prev": "sha256:" and the hex SHA-256 of that line's bytes), so that a
// line changed, removed or moved breaks the chain at the next one. The
// first line ("export") names the account, the span and the public keys;
// each decision carries its receipt, which the server signed when it made
// the decision (receipt.go); the last line ("end") counts the lines and is
// signed over the last hash, so that a file cut short or rechained by
// someone without the key does not verify. VerifyAuditExport checks it all
// offline and names the first break.

// AuditExportFormat names the export's format in its first line.
const AuditExportFormat = "arbiter-audit-export/1"

// AuditExportEndType is the "typ" of the end line's JWS.
const AuditExportEndType = "arbiter-audit-export+jws"

// MaxAuditLineBytes bounds one line of an export (a decision's approved
// args are at most MaxActionArgsBytes).
const MaxAuditLineBytes = 1 << 20

// Audit export line kinds.
const (
	AuditLineExport   = "export"
	AuditLineDecision = "decision"
	AuditLineEvent    = "event"
	AuditLineEnd      = "end"
)

// AuditLine is one line of an export. Kind says which of the other
// fields it has.
type AuditLine struct {
	Kind string `json:"kind"`
	Line int64  `json:"line"`
	// Prev is the hash of the line before; nil on the first line.
	Prev *string `json:"prev"`

	// The export line: whose record, from when, made when, with the
	// keys that signed it.
	Account    string     `json:"account,omitempty"`
	Format     string     `json:"format,omitempty"`
	Since      *Timestamp `json:"since,omitempty"`
	ExportedAt *Timestamp `json:"exported_at,omitempty"`
	Keys       *JWKS      `json:"jwks,omitempty"`

	// A decision (kind decision) or an event (kind event), at At.
	At       *Timestamp      `json:"at,omitempty"`
	Decision *AuditDecision  `json:"decision,omitempty"`
	Event    *AuditEventLine `json:"event,omitempty"`

	// The end line: how many lines came before it, and its signature
	// over the account, that count and the hash of the line before.
	Lines     int64  `json:"lines,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// AuditDecision is a final decision in an export: what its receipt signs,
// the action it approved (nil without one) and the receipt.
type AuditDecision struct {
	TaskID    string          `json:"task_id"`
	Seq       int64           `json:"seq"`
	Verdict   string          `json:"verdict"`
	Tier      string          `json:"tier"`
	DecidedBy string          `json:"decided_by"`
	Action    *ApprovedAction `json:"approved_action"`
	Receipt   string          `json:"receipt"`
}

// AuditEventLine is an administrative event of the account's audit log.
type AuditEventLine struct {
	ID        int64  `json:"id"`
	Kind      string `json:"kind"`
	Actor     string `json:"actor"`
	Detail    string `json:"detail"`
	ClientIP  string `json:"client_ip"`
	UserAgent string `json:"user_agent"`
}

// auditEndClaims are what the end line's signature covers.
type auditEndClaims struct {
	Account string `json:"account"`
	Lines   int64  `json:"lines"`
	Last    string `json:"last"`
}

// AuditChain writes an export's lines, each naming the hash of the one
// before. Its zero value starts a new export.
type AuditChain struct {
	account string
	line    int64
	prev    string
}

// Write appends l, numbered and chained, to w as one canonical JSON line.
func (c *AuditChain) Write(w io.Writer, l AuditLine) error {
	c.line++
	l.Line = c.line
	if c.line > 1 {
		prev := c.prev
		l.Prev = &prev
	}
	if l.Kind == AuditLineExport {
		c.account = l.Account
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if b, err = jcs.Canonicalize(b); err != nil {
		return err
	}
	c.prev = LineHash(b)
	_, err = w.Write(append(b, '\n'))
	return err
}

// End writes the end line, signed by k over the account, the count of
// lines before it and the last line's hash.
func (c *AuditChain) End(w io.Writer, k ReceiptKey) error {
	sig, err := signJWS(k, AuditExportEndType, auditEndClaims{Account: c.account, Lines: c.line, Last: c.prev})
	if err != nil {
		return err
	}
	return c.Write(w, AuditLine{Kind: AuditLineEnd, Lines: c.line, Signature: sig})
}

// LineHash returns the hash a line's successor names: "sha256:" and the
// hex SHA-256 of the line's bytes, without its newline.
func LineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// AuditBreak is where an export stops verifying: the line (from 1) and
// why.
type AuditBreak struct {
	Line   int64
	Reason string
}

// Error implements the error interface.
func (b *AuditBreak) Error() string {
	return fmt.Sprintf("line %d: %s", b.Line, b.Reason)
}

// AuditReport is what VerifyAuditExport found in an export that verifies.
type AuditReport struct {
	Account   string
	Lines     int64
	Decisions int
	Events    int
	// KeysFromExport is true when the keys came from the export's own
	// first line, not from the caller: the file is consistent, but only
	// keys obtained elsewhere (the server's JWKS) prove who signed it.
	KeysFromExport bool
}

// VerifyAuditExport reads an export and checks, line by line, that each
// is canonical JSON of its kind, numbered in order, naming the previous
// line's hash; that every receipt verifies with keys (nil: the keys the
// export's first line lists), says what its line says, and follows the
// receipt before it in its account's chain; that every approved action's
// digest is its name's and args'; and that the export ends with its signed
// end line. The first break is an *AuditBreak.
func VerifyAuditExport(r io.Reader, keys *JWKS) (AuditReport, error) {
	var rep AuditReport
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxAuditLineBytes+1)
	var (
		n        int64
		prevHash string
		lastSeq  int64
		lastRcpt string
		ended    bool
	)
	fail := func(format string, args ...any) (AuditReport, error) {
		return rep, &AuditBreak{Line: n, Reason: fmt.Sprintf(format, args...)}
	}
	for sc.Scan() {
		n++
		raw := sc.Bytes()
		if ended {
			return fail("a line follows the end line")
		}
		var l AuditLine
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return fail("not a line of an export: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		if canonical, err := jcs.Canonicalize(raw); err != nil || !bytes.Equal(canonical, raw) {
			return fail("the line is not in canonical form: it was edited")
		}
		if l.Line != n {
			return fail("the line says it is line %d: a line before it was removed or moved", l.Line)
		}
		switch {
		case n == 1 && l.Prev != nil:
			return fail("the first line names a previous line")
		case n > 1 && (l.Prev == nil || *l.Prev != prevHash):
			return fail("the previous line's hash does not match: line %d was changed, removed or moved", n-1)
		}
		switch l.Kind {
		case AuditLineExport:
			if n != 1 {
				return fail("an export line after the first")
			}
			if l.Format != AuditExportFormat || l.Account == "" || l.Keys == nil {
				return fail("the first line is not an export line of %s", AuditExportFormat)
			}
			rep.Account = l.Account
			if keys == nil {
				keys, rep.KeysFromExport = l.Keys, true
			}
		case AuditLineDecision:
			if n == 1 {
				return fail("the export does not start with its export line")
			}
			if err := checkAuditDecision(l, rep.Account, *keys, &lastSeq, &lastRcpt); err != nil {
				return fail("%s", err.Error())
			}
			rep.Decisions++
		case AuditLineEvent:
			if n == 1 {
				return fail("the export does not start with its export line")
			}
			if l.Event == nil || l.At == nil {
				return fail("an event line without its event")
			}
			rep.Events++
		case AuditLineEnd:
			if n == 1 {
				return fail("the export does not start with its export line")
			}
			if l.Lines != n-1 {
				return fail("the end line counts %d lines before it, not %d", l.Lines, n-1)
			}
			var c auditEndClaims
			if err := verifyJWS(l.Signature, AuditExportEndType, *keys, &c); err != nil {
				return fail("the end line's signature: %s", err.Error())
			}
			if c.Account != rep.Account || c.Lines != n-1 || c.Last != prevHash {
				return fail("the end line's signature covers another export (account %s, %d lines, last %s)", c.Account, c.Lines, c.Last)
			}
			ended = true
		default:
			return fail("an unknown kind of line %q", l.Kind)
		}
		prevHash = LineHash(raw)
	}
	if err := sc.Err(); err != nil {
		n++
		if errors.Is(err, bufio.ErrTooLong) {
			return fail("the line is longer than %d bytes", MaxAuditLineBytes)
		}
		return fail("%s", err.Error())
	}
	if n == 0 {
		n = 1
		return fail("the export is empty")
	}
	if !ended {
		return fail("the export ends without its signed end line: it was cut short")
	}
	rep.Lines = n
	return rep, nil
}

// checkAuditDecision checks a decision line: its receipt verifies with
// keys and says what the line says, follows the receipt before it, and its
// approved action's digest is its own.
func checkAuditDecision(l AuditLine, account string, keys JWKS, lastSeq *int64, lastReceipt *string) error {
	d := l.Decision
	if d == nil || l.At == nil {
		return errors.New("a decision line without its decision")
	}
	c, err := VerifyReceipt(d.Receipt, keys)
	if err != nil {
		return fmt.Errorf("the receipt of %s does not verify: %w", d.TaskID, errors.Unwrap(err))
	}
	var digest *string
	if d.Action != nil {
		if ActionDigest(d.Action.Name, d.Action.Args) != d.Action.Digest {
			return fmt.Errorf("the approved action of %s is not the one its digest names", d.TaskID)
		}
		digest = &d.Action.Digest
	}
	switch {
	case c.Account != account:
		return fmt.Errorf("the receipt of %s is another account's", d.TaskID)
	case c.TaskID != d.TaskID || c.Verdict != d.Verdict || c.Tier != d.Tier || c.DecidedBy != d.DecidedBy ||
		c.Seq != d.Seq || c.DecidedAt != *l.At || !equalPtr(c.ActionDigest, digest):
		return fmt.Errorf("the line says other than its receipt of %s", c.TaskID)
	case *lastReceipt != "" && (c.Seq != *lastSeq+1 || c.Prev == nil || *c.Prev != ReceiptHash(*lastReceipt)):
		return fmt.Errorf("the receipt of %s (seq %d) does not follow the one before (seq %d): a decision is missing", c.TaskID, c.Seq, *lastSeq)
	}
	*lastSeq, *lastReceipt = c.Seq, d.Receipt
	return nil
}

func equalPtr(a, b *string) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// signJWS returns a compact JWS, EdDSA by k, of claims in canonical form
// with the header type typ.
func signJWS(k ReceiptKey, typ string, claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	if payload, err = jcs.Canonicalize(payload); err != nil {
		return "", err
	}
	header := []byte(`{"alg":"EdDSA","kid":`)
	header = jcs.AppendString(header, k.ID)
	header = append(header, `,"typ":`...)
	header = jcs.AppendString(header, typ)
	header = append(header, '}')
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(payload)
	return signing + "." + enc.EncodeToString(ed25519.Sign(k.Private, []byte(signing))), nil
}

// verifyJWS checks a compact JWS of type typ against keys and decodes its
// payload into v, refusing members v does not have.
func verifyJWS(jws, typ string, keys JWKS, v any) error {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		return errors.New("not a compact JWS")
	}
	enc := base64.RawURLEncoding
	header, err := enc.DecodeString(parts[0])
	if err != nil {
		return errors.New("its header is not base64url")
	}
	var h struct{ Alg, Kid, Typ string }
	if err := json.Unmarshal(header, &h); err != nil || h.Alg != "EdDSA" || h.Typ != typ {
		return fmt.Errorf("its header is not an EdDSA JWS of type %s", typ)
	}
	var pub ed25519.PublicKey
	for _, k := range keys.Keys {
		if k.Kid == h.Kid && k.Kty == "OKP" && k.Crv == "Ed25519" {
			if x, err := enc.DecodeString(k.X); err == nil && len(x) == ed25519.PublicKeySize {
				pub = x
			}
		}
	}
	if pub == nil {
		return fmt.Errorf("no Ed25519 key has the id %s", h.Kid)
	}
	sig, err := enc.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		return errors.New("the signature does not match")
	}
	payload, err := enc.DecodeString(parts[1])
	if err != nil {
		return errors.New("its payload is not base64url")
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New("its payload is not what the type signs")
	}
	return nil
}

// ParseAuditExportQuery reads the query of an export: since, when given,
// is when it starts, as Unix epoch seconds (the API's timestamps) or an
// RFC 3339 time or date ("2026-07-01"); 0 without it. Any other
// parameter, or a since that is none of those, is EINVALID.
func ParseAuditExportQuery(query url.Values) (Timestamp, error) {
	for k := range query {
		if k != "since" {
			return 0, Errorf(EINVALID, "The export takes one parameter, since; %q is not one.", k)
		}
	}
	if len(query["since"]) > 1 {
		return 0, FieldErrorf("since", "Give since once.")
	}
	raw := strings.TrimSpace(query.Get("since"))
	if raw == "" {
		return 0, nil
	}
	errSince := FieldErrorf("since", "since must be Unix epoch seconds (1767225600) or an RFC 3339 time or date (2026-01-01T00:00:00Z, 2026-01-01).")
	if f, err := strconv.ParseFloat(raw, 64); err == nil {
		if f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f > 1e11 {
			return 0, errSince
		}
		return Timestamp(f*1000 + 0.5), nil
	}
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, raw); err == nil && t.Unix() >= 0 {
			return TimestampOf(t), nil
		}
	}
	return 0, errSince
}

// AuditExportService streams an account's audit export.
type AuditExportService interface {
	// ExportAudit writes the account's export to w: its decisions made
	// and events recorded at or after since (0: all), oldest first,
	// chained and ended with the signed end line (see
	// VerifyAuditExport). A write to w that fails ends it.
	ExportAudit(ctx context.Context, accountID string, since Timestamp, w io.Writer) error
}
