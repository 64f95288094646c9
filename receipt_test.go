package arbiter_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

var updateVectors = flag.Bool("update", false, "rewrite testdata/receipts/vectors.json")

// receiptVectors is testdata/receipts/vectors.json, which the Python and
// TypeScript SDKs' tests verify too: a test key (its seed, and its JWKS),
// a chain of receipts with their claims and hashes, and receipts that
// must not verify.
type receiptVectors struct {
	Note     string       `json:"note"`
	Seed     string       `json:"seed"`
	JWKS     arbiter.JWKS `json:"jwks"`
	Receipts []struct {
		Claims  arbiter.ReceiptClaims `json:"claims"`
		Receipt string                `json:"receipt"`
		Hash    string                `json:"hash"`
	} `json:"receipts"`
	Invalid []struct {
		Why     string `json:"why"`
		Receipt string `json:"receipt"`
	} `json:"invalid"`
}

const receiptVectorsPath = "testdata/receipts/vectors.json"

func vectorKey(t *testing.T, seedHex string) arbiter.ReceiptKey {
	t.Helper()
	seed, err := hex.DecodeString(seedHex)
	if err != nil || len(seed) != ed25519.SeedSize {
		t.Fatalf("bad seed %q", seedHex)
	}
	return arbiter.ReceiptKeyOf(ed25519.NewKeyFromSeed(seed))
}

func TestReceipt_Vectors(t *testing.T) {
	if *updateVectors {
		writeReceiptVectors(t)
	}
	b, err := os.ReadFile(receiptVectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var v receiptVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	key := vectorKey(t, v.Seed)
	if !reflect.DeepEqual(v.JWKS, arbiter.JWKS{Keys: []arbiter.JWK{key.Public()}}) {
		t.Errorf("jwks = %+v, want the seed's key %+v", v.JWKS, key.Public())
	}
	if len(v.Receipts) < 2 || len(v.Invalid) < 4 {
		t.Fatalf("too few vectors: %d receipts, %d invalid", len(v.Receipts), len(v.Invalid))
	}
	var prev *string
	for i, r := range v.Receipts {
		signed, err := arbiter.SignReceipt(key, r.Claims)
		if err != nil || signed != r.Receipt {
			t.Errorf("receipt %d: SignReceipt = %s, %v\nwant %s", i, signed, err, r.Receipt)
		}
		claims, err := arbiter.VerifyReceipt(r.Receipt, v.JWKS)
		if err != nil || !reflect.DeepEqual(claims, r.Claims) {
			t.Errorf("receipt %d: VerifyReceipt = %+v, %v", i, claims, err)
		}
		if h := arbiter.ReceiptHash(r.Receipt); h != r.Hash {
			t.Errorf("receipt %d: hash %s, want %s", i, h, r.Hash)
		}
		if !reflect.DeepEqual(r.Claims.Prev, prev) {
			t.Errorf("receipt %d: prev %v, want the hash of the one before (%v)", i, r.Claims.Prev, prev)
		}
		h := r.Hash
		prev = &h
	}
	for _, r := range v.Invalid {
		if c, err := arbiter.VerifyReceipt(r.Receipt, v.JWKS); !errors.Is(err, arbiter.ErrReceiptInvalid) {
			t.Errorf("%s: VerifyReceipt = %+v, %v; want ErrReceiptInvalid", r.Why, c, err)
		}
	}
}

// writeReceiptVectors makes the vectors file from a fixed seed.
func writeReceiptVectors(t *testing.T) {
	t.Helper()
	v := receiptVectors{
		Note: "Receipt test vectors: a compact JWS (EdDSA, Ed25519) over the claims in RFC 8785 canonical JSON. The seed is a TEST key, published here on purpose. " +
			"Each receipt's prev is the hash of the one before; 'invalid' receipts must not verify. Regenerate with: go test -run TestReceipt_Vectors -update .",
		Seed: strings.Repeat("a5", 32),
	}
	key := vectorKey(t, v.Seed)
	v.JWKS = arbiter.JWKS{Keys: []arbiter.JWK{key.Public()}}
	digest := "sha256:42f0bfae3a0a96793ce4c09909f6e369184d2acf3003b7b3fcca120063a630d1"
	version := "v7"
	claims := []arbiter.ReceiptClaims{
		{TaskID: "tsk_0123456789abcdef", Account: "acc_00000000000000000001", Verdict: "approve", Tier: arbiter.TierHuman,
			DecidedBy: "per_0123456789abcdef", ActionDigest: &digest, DecidedAt: 1763805600123, Seq: 1},
		{TaskID: "tsk_fedcba9876543210", Account: "acc_00000000000000000001", Verdict: "reject", Tier: arbiter.TierAgent,
			DecidedBy: arbiter.DecidedByAgent("gpt-4o-mini", &version), DecidedAt: 1763805601000, Seq: 2},
		{TaskID: "tsk_00000000000000ff", Account: "acc_00000000000000000001", Verdict: "approve", Tier: arbiter.TierFallback,
			DecidedBy: arbiter.DecidedByFallback, DecidedAt: 1763805659999, Seq: 3},
	}
	var prev *string
	for _, c := range claims {
		c.Prev = prev
		jws, err := arbiter.SignReceipt(key, c)
		if err != nil {
			t.Fatal(err)
		}
		h := arbiter.ReceiptHash(jws)
		v.Receipts = append(v.Receipts, struct {
			Claims  arbiter.ReceiptClaims `json:"claims"`
			Receipt string                `json:"receipt"`
			Hash    string                `json:"hash"`
		}{c, jws, h})
		prev = &h
	}
	good := v.Receipts[0].Receipt
	parts := strings.Split(good, ".")
	enc := base64.RawURLEncoding
	payload, _ := enc.DecodeString(parts[1])
	changed := strings.Replace(string(payload), `"approve"`, `"reject"`, 1)
	other := arbiter.ReceiptKeyOf(ed25519.NewKeyFromSeed(make([]byte, 32)))
	foreign, err := arbiter.SignReceipt(other, v.Receipts[0].Claims)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := enc.DecodeString(parts[2])
	sig[0] ^= 1
	add := func(why, receipt string) {
		v.Invalid = append(v.Invalid, struct {
			Why     string `json:"why"`
			Receipt string `json:"receipt"`
		}{why, receipt})
	}
	add("the payload's verdict changed after signing", parts[0]+"."+enc.EncodeToString([]byte(changed))+"."+parts[2])
	add("one bit of the signature flipped", parts[0]+"."+parts[1]+"."+enc.EncodeToString(sig))
	add("signed by a key the JWKS does not hold", foreign)
	add("a header with alg none", enc.EncodeToString([]byte(`{"alg":"none","kid":"`+key.ID+`","typ":"`+arbiter.ReceiptType+`"}`))+"."+parts[1]+".")
	add("not three parts", parts[0]+"."+parts[1])
	out, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("testdata/receipts", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(receiptVectorsPath, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyReceipt_RefusesAnotherAccountsChainKey(t *testing.T) {
	k1, err := arbiter.NewReceiptKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := arbiter.NewReceiptKey()
	jws, err := arbiter.SignReceipt(k1, arbiter.ReceiptClaims{TaskID: "tsk_1", Verdict: "approve", Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := arbiter.VerifyReceipt(jws, arbiter.JWKS{Keys: []arbiter.JWK{k2.Public()}}); !errors.Is(err, arbiter.ErrReceiptInvalid) {
		t.Errorf("verify with another key: %v", err)
	}
	// The same kid with another key's x: a forged JWKS entry.
	forged := k2.Public()
	forged.Kid = k1.ID
	if _, err := arbiter.VerifyReceipt(jws, arbiter.JWKS{Keys: []arbiter.JWK{forged}}); !errors.Is(err, arbiter.ErrReceiptInvalid) {
		t.Errorf("verify with a forged key: %v", err)
	}
	if _, err := arbiter.VerifyReceipt(jws, arbiter.JWKS{Keys: []arbiter.JWK{k1.Public()}}); err != nil {
		t.Errorf("verify with its key: %v", err)
	}
}
