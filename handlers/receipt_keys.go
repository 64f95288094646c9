package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// ReceiptKeysGet handles GET /.well-known/arbiter/jwks.json: the public
// keys that sign receipts and audit exports (arbiter.JWKS), the signing
// key first and the retired ones after it, so that anyone can verify a
// receipt offline. No key is needed; caches may keep it five minutes, the
// longest a rotation takes to reach a verifier that refetches.
func ReceiptKeysGet(receipts arbiter.ReceiptService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys, err := receipts.ReceiptKeys(r.Context())
		if err != nil {
			Error(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		JSON(w, http.StatusOK, keys)
	})
}
