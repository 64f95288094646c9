package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/arbiterhq/arbiter"
)

// The integrity phase (issue 44): what approval integrity adds to a
// create and a decision, timed in this process with testing.Benchmark.
// A create with an action computes its digest (the RFC 8785 form of
// {name, args}, then SHA-256); a final decision signs its receipt
// (Ed25519 over the claims' canonical JSON) and hashes the receipt
// before it for the chain. The target: each under 0.1 ms for a typical
// action. The largest arguments the API accepts
// (arbiter.MaxActionArgsBytes) are timed for reference.

// integrityTarget is the most each step may take for a typical action.
const integrityTarget = 100 * time.Microsecond

// integrityStep is one timed step.
type integrityStep struct {
	name        string
	nsPerOp     int64
	bytesPerOp  int64
	allocsPerOp int64
	target      bool // held to integrityTarget, else for reference
	failed      error
}

// typicalAction is a refund as an agent would propose it: a few members,
// one nested, about 300 bytes.
const typicalAction = `{"order": "ord_8f3a2c", "amount": 120.50, "currency": "EUR", "reason": "The parcel arrived damaged; photos attached.",
	"customer": {"id": "cus_4412", "email": "ann@example.com", "tier": "gold"}, "lines": [1, 2, 3], "notify": true}`

// largestArgs returns action arguments of about the largest canonical
// size the API accepts: an object of short string members.
func largestArgs() json.RawMessage {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; b.Len() < arbiter.MaxActionArgsBytes-64; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"member_` + strconv.Itoa(i) + `":"a value of some length, with ünïcödé"`)
	}
	b.WriteString("}")
	return json.RawMessage(b.String())
}

// measureIntegrity times the action digest and the receipt signature.
func (b *bench) measureIntegrity(ctx context.Context) error {
	b.logf("timing the action digest and the receipt signature")
	key, err := arbiter.NewReceiptKey()
	if err != nil {
		return err
	}
	digest := arbiter.ActionDigest("issue_refund", json.RawMessage(typicalAction))
	prev := arbiter.ReceiptHash("eyJhbGciOiJFZERTQSJ9.e30.c2ln")
	claims := arbiter.ReceiptClaims{TaskID: "tsk_0123456789abcdef", Account: "acc_00000000000000000001", Verdict: "approve",
		Tier: arbiter.TierHuman, DecidedBy: "per_0123456789abcdef", ActionDigest: &digest,
		DecidedAt: arbiter.TimestampOf(time.Now()), Seq: 41, Prev: &prev}
	largest := largestArgs()
	steps := []struct {
		name   string
		target bool
		run    func() error
	}{
		{"action digest on create (typical, 0.3 KB)", true, func() error {
			if d := arbiter.ActionDigest("issue_refund", json.RawMessage(typicalAction)); d != digest {
				return fmt.Errorf("the digest changed between runs: %s", d)
			}
			return nil
		}},
		{fmt.Sprintf("action digest on create (largest, %d KB)", len(largest)>>10), false, func() error {
			if d := arbiter.ActionDigest("issue_refund", largest); !strings.HasPrefix(d, arbiter.DigestPrefix) {
				return fmt.Errorf("the largest arguments have no digest: %q", d)
			}
			return nil
		}},
		{"receipt on decide (sign and chain)", true, func() error {
			receipt, err := arbiter.SignReceipt(key, claims)
			if err != nil {
				return err
			}
			if arbiter.ReceiptHash(receipt) == "" {
				return fmt.Errorf("a receipt without a hash")
			}
			return nil
		}},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.run(); err != nil {
			b.integrity = append(b.integrity, integrityStep{name: s.name, target: s.target, failed: err})
			continue
		}
		var failed error
		r := testing.Benchmark(func(tb *testing.B) {
			tb.ReportAllocs()
			for tb.Loop() {
				if err := s.run(); err != nil {
					failed = err
					return
				}
			}
		})
		b.integrity = append(b.integrity, integrityStep{name: s.name, nsPerOp: r.NsPerOp(), bytesPerOp: r.AllocedBytesPerOp(),
			allocsPerOp: r.AllocsPerOp(), target: s.target, failed: failed})
	}
	// The receipt signed here verifies with the key's JWKS: the step
	// timed is the real signature.
	receipt, err := arbiter.SignReceipt(key, claims)
	if err != nil {
		return err
	}
	if _, err := arbiter.VerifyReceipt(receipt, arbiter.JWKS{Keys: []arbiter.JWK{key.Public()}}); err != nil {
		return fmt.Errorf("the bench's receipt does not verify: %w", err)
	}
	return nil
}

// printIntegrity writes the integrity phase's table and its verdict.
func printIntegrity(w io.Writer, steps []integrityStep) {
	if len(steps) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "integrity\tµs/op\tB/op\tallocs/op\t\n")
	for _, s := range steps {
		if s.failed != nil {
			fmt.Fprintf(tw, "%s: %v\t\t\t\t\n", s.name, s.failed)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\t\n", s.name, float64(s.nsPerOp)/1e3, s.bytesPerOp, s.allocsPerOp)
	}
	tw.Flush()
	for _, s := range steps {
		check := "(for reference)"
		if s.target {
			check = fmt.Sprintf("(target < %.1f ms) %s", float64(integrityTarget)/1e6, verdict(s.failed == nil && s.nsPerOp > 0 && s.nsPerOp < int64(integrityTarget)))
		}
		fmt.Fprintf(w, "%-22s %.3f ms %s\n", "integrity: "+s.name, float64(s.nsPerOp)/1e6, check)
	}
}
