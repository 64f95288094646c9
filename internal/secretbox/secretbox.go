// Package secretbox seals secrets kept in the store (webhook signing
// secrets, Slack tokens) with AES-256-GCM under the operator's key,
// ARBITER_SECRET_KEY.
//
// The key is a keyring: one or more base64-encoded 32-byte keys separated
// by commas. The first key seals; every key opens. To rotate, put a new key
// first and keep the old ones after it, restart, and reseal (`arbiter admin
// reseal-secrets`, or let the server reseal at start); once nothing is
// sealed under an old key, drop it from the list.
//
// A sealed value reads "sb1.KEYID.DATA": KEYID names the key (the first
// eight hex digits of its SHA-256), DATA is base64url of the nonce and the
// ciphertext. The associated data binds a value to its row (an account or
// endpoint id), so a sealed value copied to another row does not open.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// prefix starts every sealed value, so a plaintext value is told apart.
const prefix = "sb1."

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

// ErrNoKey is returned when a value is sealed under a key the keyring does
// not hold (or there is no keyring at all).
var ErrNoKey = errors.New("the secret is sealed under a key ARBITER_SECRET_KEY does not hold")

// A Keyring seals with its first key and opens with any of its keys. The
// nil *Keyring seals nothing: Seal is refused and only plaintext reads.
type Keyring struct {
	ids   []string
	aeads []cipher.AEAD
}

// Parse reads a keyring: base64 (standard or URL alphabet, padded or not)
// 32-byte keys separated by commas, the sealing key first. It never
// includes the value in its error.
func Parse(s string) (*Keyring, error) {
	k := &Keyring{}
	seen := map[string]bool{}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, err := decodeKey(part)
		if err != nil || len(key) != KeySize {
			return nil, fmt.Errorf("key %d must be %d bytes in base64 (openssl rand -base64 32)", i+1, KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(key)
		id := hex.EncodeToString(sum[:4])
		if seen[id] {
			continue
		}
		seen[id] = true
		k.ids, k.aeads = append(k.ids, id), append(k.aeads, aead)
	}
	if len(k.ids) == 0 {
		return nil, errors.New("must hold at least one key")
	}
	return k, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// NewKey returns a fresh key, base64-encoded, for ARBITER_SECRET_KEY.
func NewKey() string {
	b := make([]byte, KeySize)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// IsSealed reports whether s is a sealed value rather than plaintext.
func IsSealed(s string) bool { return strings.HasPrefix(s, prefix) }

// Seal encrypts plaintext under the first key, bound to aad.
func (k *Keyring) Seal(plaintext, aad string) (string, error) {
	if k == nil {
		return "", ErrNoKey
	}
	aead := k.aeads[0]
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	out := aead.Seal(nonce, nonce, []byte(plaintext), []byte(aad))
	return prefix + k.ids[0] + "." + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open returns the plaintext of a value Seal returned with the same aad. A
// value that is not sealed is returned as it is: rows written before a key
// was configured hold plaintext until they are resealed.
func (k *Keyring) Open(stored, aad string) (string, error) {
	if !IsSealed(stored) {
		return stored, nil
	}
	id, data, ok := strings.Cut(strings.TrimPrefix(stored, prefix), ".")
	if !ok {
		return "", errors.New("a sealed secret is malformed")
	}
	if k == nil {
		return "", ErrNoKey
	}
	for i, kid := range k.ids {
		if kid != id {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(data)
		aead := k.aeads[i]
		if err != nil || len(raw) < aead.NonceSize() {
			return "", errors.New("a sealed secret is malformed")
		}
		plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(aad))
		if err != nil {
			return "", errors.New("a sealed secret does not open: it was altered or belongs to another row")
		}
		return string(plain), nil
	}
	return "", ErrNoKey
}

// Current reports whether stored is sealed under the sealing key, so
// resealing would not change which key it needs.
func (k *Keyring) Current(stored string) bool {
	return k != nil && strings.HasPrefix(stored, prefix+k.ids[0]+".")
}

// Reseal returns stored sealed under the first key: plaintext is sealed,
// a value under an older key is opened and sealed again. changed is false
// when stored is already current (or empty, which stays empty).
func (k *Keyring) Reseal(stored, aad string) (_ string, changed bool, err error) {
	if stored == "" || k.Current(stored) {
		return stored, false, nil
	}
	plain, err := k.Open(stored, aad)
	if err != nil {
		return "", false, err
	}
	sealed, err := k.Seal(plain, aad)
	return sealed, err == nil, err
}
