package arbiter

import (
	"context"
	"strings"
	"unicode/utf8"
)

// APIKeyPrefix starts every API key; 28 lowercase hex digits follow it.
const APIKeyPrefix = "svc_live_"

// APIKeyLen is the fixed length of an API key's plaintext.
const APIKeyLen = len(APIKeyPrefix) + 28

// APIKey is an account's credential for /v1. Only the SHA-256 hash of its
// plaintext and a display prefix are stored; the plaintext is shown once.
type APIKey struct {
	ID         string
	AccountID  string
	Name       string
	Prefix     string // the first characters of the plaintext, for display
	Hash       string // hex SHA-256 of the plaintext
	CreatedAt  Timestamp
	LastUsedAt *Timestamp
	RevokedAt  *Timestamp
}

// Active reports whether the key can still authenticate.
func (k *APIKey) Active() bool { return k.RevokedAt == nil }

// NewAPIKeyPlaintext returns a fresh random API key.
func NewAPIKeyPlaintext() string { return NewID(APIKeyPrefix, 14) }

// NewAPIKeyID returns a fresh id for an API key record (not a secret).
func NewAPIKeyID() string { return NewID("key_", 8) }

// ValidAPIKey reports whether s has the shape of an API key. Malformed keys
// are refused before any lookup.
func ValidAPIKey(s string) bool {
	rest, ok := strings.CutPrefix(s, APIKeyPrefix)
	return ok && len(s) == APIKeyLen && isLowerHex(rest)
}

// APIKeyDisplayPrefix returns the part of a plaintext key that may be shown
// again: the fixed prefix and the first four secret characters.
func APIKeyDisplayPrefix(plaintext string) string { return plaintext[:len(APIKeyPrefix)+4] }

// MaxKeyNameChars bounds an API key's name.
const MaxKeyNameChars = 100

// NormalizeKeyName returns the name a key is stored under: name without
// surrounding spaces, which must leave between 1 and MaxKeyNameChars
// characters of text (valid UTF-8, no NUL). Returns EINVALID.
func NormalizeKeyName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", Errorf(EINVALID, "A key needs a name.")
	} else if utf8.RuneCountInString(name) > MaxKeyNameChars || !isText(name) {
		return "", Errorf(EINVALID, "A key name must be at most %d characters of text.", MaxKeyNameChars)
	}
	return name, nil
}

// APIKeyService manages API keys.
type APIKeyService interface {
	// CreateAPIKey creates a key for the account and returns the record and
	// the plaintext, which is never available again. The key_created event
	// of the account's audit log, naming by, is written in the same
	// transaction: a key exists only if its creation is on record.
	// Returns EINVALID for a name NormalizeKeyName refuses, ENOTFOUND for
	// an unknown account, and ErrNotAllowed when by's role in the account
	// may not manage keys (Can).
	CreateAPIKey(ctx context.Context, accountID, name string, by Actor) (*APIKey, string, error)

	// FindAPIKeyByHash returns the key with the given hash, revoked or not.
	// Returns ENOTFOUND when there is none.
	FindAPIKeyByHash(ctx context.Context, hash string) (*APIKey, error)

	// FindAPIKeysByHash returns the keys with the given hashes, revoked or
	// not, in any order; a hash no key has is left out. The key checker
	// renews the entries of the keys in use with it, a few statements at
	// most however many keys.
	FindAPIKeysByHash(ctx context.Context, hashes []string) ([]*APIKey, error)

	// ListAPIKeys returns the account's keys, revoked ones included, newest first.
	ListAPIKeys(ctx context.Context, accountID string) ([]*APIKey, error)

	// RevokeAPIKey revokes a key and writes the key_revoked event, naming
	// by, in the same transaction. accountID scopes the lookup; "" means
	// any account (operator use). Returns ENOTFOUND for an unknown key or
	// one of another account, ErrNotAllowed as CreateAPIKey does, and
	// ECONFLICT when it is already revoked.
	RevokeAPIKey(ctx context.Context, accountID, keyID string, by Actor) (*APIKey, error)

	// TouchAPIKeys records last use times, as coalesced by the key checker.
	// A later time never goes backwards.
	TouchAPIKeys(ctx context.Context, lastUsed map[string]Timestamp) error
}
