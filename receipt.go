package arbiter

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/arbiterhq/arbiter/internal/jcs"
)

// A receipt proves a final decision offline: a compact JWS (RFC 7515),
// EdDSA over Ed25519 (RFC 8037), whose payload is the decision's
// ReceiptClaims in canonical JSON (RFC 8785). Each account's receipts form
// a chain: every one names the hash of the one before it (Prev) and its
// place in the chain (Seq), so that a receipt removed or replaced later
// shows. The keys sign in turn: the newest signs, the older ones stay
// published (the JWKS) so that receipts they signed still verify.

// ReceiptType is the "typ" of a receipt's JWS header.
const ReceiptType = "arbiter-receipt+jws"

// ReceiptClaims are what a receipt signs.
type ReceiptClaims struct {
	TaskID  string `json:"task_id"`
	Account string `json:"account"`
	Verdict string `json:"verdict"`
	Tier    string `json:"tier"`
	// DecidedBy is who decided: the person's id (per_…) for a person,
	// the person ids of the counted votes joined by commas for a
	// consensus, "agent:" and the verifier with "@" and its version for
	// the agent, "fallback:on_expiry" for the on-expiry outcome.
	DecidedBy string `json:"decided_by"`
	// ActionDigest is the digest of the approved action; nil for a task
	// without an action.
	ActionDigest *string   `json:"action_digest"`
	DecidedAt    Timestamp `json:"decided_at"`
	// Seq is the receipt's place in its account's chain, from 1.
	Seq int64 `json:"seq"`
	// Prev is ReceiptHash of the account's receipt before this one; nil
	// for the first.
	Prev *string `json:"prev"`
}

// DecidedByAgent is ReceiptClaims.DecidedBy for a verifier (its model or
// name) at a version ("" for none).
func DecidedByAgent(verifier string, version *string) string {
	s := "agent:" + verifier
	if version != nil && *version != "" {
		s += "@" + *version
	}
	return s
}

// DecidedByFallback is ReceiptClaims.DecidedBy for the on-expiry outcome.
const DecidedByFallback = "fallback:on_expiry"

// ReceiptKey is one signing key of receipts. Its ID is the key's JWK
// thumbprint (RFC 7638), which a receipt's header names as "kid".
type ReceiptKey struct {
	ID        string
	Private   ed25519.PrivateKey
	CreatedAt Timestamp
	// RetiredAt is when a newer key took over signing; nil for the key
	// that signs.
	RetiredAt *Timestamp
}

// NewReceiptKey returns a fresh signing key, from crypto/rand.
func NewReceiptKey() (ReceiptKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return ReceiptKey{}, err
	}
	return ReceiptKeyOf(priv), nil
}

// ReceiptKeyOf returns the receipt key of an Ed25519 private key.
func ReceiptKeyOf(priv ed25519.PrivateKey) ReceiptKey {
	return ReceiptKey{ID: jwkThumbprint(priv.Public().(ed25519.PublicKey)), Private: priv}
}

// Public returns the key's public half as a JWK.
func (k ReceiptKey) Public() JWK {
	pub := k.Private.Public().(ed25519.PublicKey)
	return JWK{Kty: "OKP", Crv: "Ed25519", X: b64(pub), Kid: k.ID, Alg: "EdDSA", Use: "sig"}
}

// JWK is a public Ed25519 key as RFC 8037 writes it.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// JWKS is a set of public keys (RFC 7517 §5), as served at
// /.well-known/arbiter/jwks.json.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// jwkThumbprint is the RFC 7638 thumbprint of an Ed25519 public key:
// base64url SHA-256 of {"crv","kty","x"} in that order, without spaces.
func jwkThumbprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + b64(pub) + `"}`))
	return b64(sum[:])
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// receiptHeader is the JWS header of receipts signed by the key kid.
func receiptHeader(kid string) []byte {
	h := make([]byte, 0, 96)
	h = append(h, `{"alg":"EdDSA","kid":`...)
	h = jcs.AppendString(h, kid)
	h = append(h, `,"typ":"`+ReceiptType+`"}`...)
	return h
}

// SignReceipt returns the receipt of claims, signed by k: a compact JWS
// whose payload is the claims' canonical JSON.
func SignReceipt(k ReceiptKey, c ReceiptClaims) (string, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	if payload, err = jcs.Canonicalize(payload); err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	header := receiptHeader(k.ID)
	signing := make([]byte, 0, enc.EncodedLen(len(header))+enc.EncodedLen(len(payload))+1+87)
	signing = enc.AppendEncode(signing, header)
	signing = append(signing, '.')
	signing = enc.AppendEncode(signing, payload)
	sig := ed25519.Sign(k.Private, signing)
	signing = append(signing, '.')
	return string(enc.AppendEncode(signing, sig)), nil
}

// ReceiptHash returns the hash a receipt's successor names as Prev:
// "sha256:" and the lowercase hex SHA-256 of the compact JWS.
func ReceiptHash(receipt string) string {
	sum := sha256.Sum256([]byte(receipt))
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// ReceiptClaimsOf reads a receipt's claims without verifying it: for the
// store, which signed it, never for a receipt from elsewhere.
func ReceiptClaimsOf(receipt string) (ReceiptClaims, error) {
	parts := strings.Split(receipt, ".")
	if len(parts) != 3 {
		return ReceiptClaims{}, errors.New("not a compact JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ReceiptClaims{}, err
	}
	var c ReceiptClaims
	err = json.Unmarshal(payload, &c)
	return c, err
}

// ErrReceiptInvalid is the error of a receipt that does not verify.
var ErrReceiptInvalid = errors.New("the receipt does not verify")

// VerifyReceipt checks a receipt against the keys and returns its claims:
// a compact JWS with the EdDSA header of a receipt, signed by the key of
// keys its header names. Any other receipt is ErrReceiptInvalid, wrapped
// with the reason.
func VerifyReceipt(receipt string, keys JWKS) (ReceiptClaims, error) {
	fail := func(why string) (ReceiptClaims, error) {
		return ReceiptClaims{}, errors.Join(ErrReceiptInvalid, errors.New(why))
	}
	parts := strings.Split(receipt, ".")
	if len(parts) != 3 {
		return fail("a receipt is three base64url parts separated by dots")
	}
	enc := base64.RawURLEncoding
	header, err := enc.DecodeString(parts[0])
	if err != nil {
		return fail("its header is not base64url")
	}
	var h struct {
		Alg, Kid, Typ string
	}
	if err := json.Unmarshal(header, &h); err != nil || h.Alg != "EdDSA" || h.Typ != ReceiptType {
		return fail("its header is not a receipt's (alg EdDSA, typ " + ReceiptType + ")")
	}
	var pub ed25519.PublicKey
	for _, k := range keys.Keys {
		if k.Kid == h.Kid && k.Kty == "OKP" && k.Crv == "Ed25519" {
			x, err := enc.DecodeString(k.X)
			if err != nil || len(x) != ed25519.PublicKeySize {
				return fail("the key " + k.Kid + " is not an Ed25519 key")
			}
			pub = x
		}
	}
	if pub == nil {
		return fail("no key has the id " + h.Kid)
	}
	sig, err := enc.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		return fail("its signature does not match")
	}
	payload, err := enc.DecodeString(parts[1])
	if err != nil {
		return fail("its payload is not base64url")
	}
	var c ReceiptClaims
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return fail("its payload is not a receipt's claims")
	}
	return c, nil
}

// ReceiptService keeps the keys that sign receipts.
type ReceiptService interface {
	// ReceiptKeys returns the public keys of every receipt key, the
	// signing one first: the JWKS.
	ReceiptKeys(ctx context.Context) (JWKS, error)
	// RotateReceiptKey makes a new key sign from now on; the old ones
	// stay published. It returns the new key's id.
	RotateReceiptKey(ctx context.Context) (string, error)
}
