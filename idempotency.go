package arbiter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Idempotency keys let a caller retry a create without making a second task
// (the semantics of the IETF httpapi draft "The Idempotency-Key HTTP Header
// Field", as Stripe implements them). A key belongs to one account; the
// first create that uses it stores the key beside its task, in the same
// transaction, with the request's Fingerprint. A later create with the key
// gets that task back when it asks for the same thing, and EMISMATCH when
// it does not. A create refused as invalid, too large or over the daily cap
// stores no key.

// MaxIdempotencyKeyLen is the longest idempotency key, in bytes.
const MaxIdempotencyKeyLen = 255

// DefaultIdempotencyTTL is how long a key is remembered after its first use
// unless ARBITER_IDEMPOTENCY_TTL says otherwise.
const DefaultIdempotencyTTL = 24 * time.Hour

// ValidateIdempotencyKey returns an EINVALID error unless key is 1 to
// MaxIdempotencyKeyLen printable ASCII characters (space to tilde). The key
// is used exactly as given: case and spaces count.
func ValidateIdempotencyKey(key string) error {
	if len(key) == 0 || len(key) > MaxIdempotencyKeyLen {
		return Errorf(EINVALID, "An idempotency key must be 1 to %d printable ASCII characters; this one has %d bytes.", MaxIdempotencyKeyLen, len(key))
	}
	if err := printableASCII(key, MaxIdempotencyKeyLen); err != nil {
		return Errorf(EINVALID, "An idempotency key must be 1 to %d printable ASCII characters; %s is not one.", MaxIdempotencyKeyLen, err)
	}
	return nil
}

// Fingerprint identifies what a create asks for, so that a retry can be
// told from a different request that reuses its idempotency key. It covers
// every field of the parsed request (defaults applied) except the key
// itself, with the context in a canonical form (object members sorted,
// insignificant whitespace dropped): neither whitespace nor the order of
// fields changes it. It is a SHA-256, in lowercase hex.
func (in TaskCreate) Fingerprint() string {
	in.IdempotencyKey = ""
	in.Context = canonicalJSON(in.Context)
	// Every field of TaskCreate takes part, so a field added later does too.
	b, err := json.Marshal(in)
	if err != nil {
		b = fmt.Appendf(nil, "%#v", in) // unreachable for a parsed request
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canonicalJSON returns raw with object members sorted by name and no
// insignificant whitespace; numbers keep their spelling. raw is returned as
// it is when it is empty or not JSON.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	b, err := json.Marshal(v) // sorts the members of every object
	if err != nil {
		return raw
	}
	return b
}

// IdempotencyKeyService forgets idempotency keys once their retention has
// ended. The worker calls it; requests never wait for it.
type IdempotencyKeyService interface {
	// PruneIdempotencyKeys deletes the keys whose retention ended and
	// returns how many it deleted. From then on each of them may be used
	// for a new task.
	PruneIdempotencyKeys(ctx context.Context) (int64, error)
}
