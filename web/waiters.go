package web

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/handlers"
)

// Waiters admits the API's requests that wait for a task
// (handlers.Waiters): at most so many of an API key and of an account at
// once (Limits: the deployment's on Postgres, see limits.Waiters), each
// evictable by the ConnLimiter it came through when the server is full
// (the server's ConnContext must be the limiter's), and each with its key
// checked again before its answer (Keys).
type Waiters struct {
	Limits arbiter.WaiterLimiter
	Keys   *KeyChecker
}

// Enter implements handlers.Waiters. r's key was admitted by bearerAuth;
// its check is the key checker's cache's.
func (w Waiters) Enter(r *http.Request) (handlers.Waiter, error) {
	client, token := handlers.ClientOf(r).LimitKey(), bearerToken(r)
	accountID, keyID, err := w.Keys.Check(r.Context(), client, token)
	if err != nil {
		return handlers.Waiter{}, err
	}
	leave, err := w.Limits.EnterWait(r.Context(), accountID, keyID)
	if err != nil {
		return handlers.Waiter{}, err
	}
	waiter := handlers.Waiter{Leave: leave, Recheck: w.Keys.Recheck(client, token)}
	if lc := limitedConnOf(r.Context()); lc != nil {
		evicted, done := lc.l.waiting(lc, keyID)
		waiter.Evicted, waiter.Leave = evicted, func() { done(); leave() }
	}
	return waiter, nil
}
