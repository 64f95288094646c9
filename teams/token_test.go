package teams_test

import (
	"sync"
	"testing"

	"github.com/arbiterhq/arbiter/teams"
	"github.com/arbiterhq/arbiter/teams/teamsfake"
)

const testTenant = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"

// TestTokens_OneRefreshAtATime: thirty-two calls needing the bot's token
// at once make one request to the token service, and later calls reuse
// the token until shortly before it expires; a token that expires within
// five minutes is replaced at its next use; a refused secret is an error
// no retry mends.
func TestTokens_OneRefreshAtATime(t *testing.T) {
	f := teamsfake.New(t)
	f.AddBot(testApp, "s3cret-value")
	tokens := &teams.Tokens{LoginURL: f.LoginURL}
	var wg sync.WaitGroup
	got := make([]string, 32)
	for i := range got {
		wg.Go(func() {
			tok, err := tokens.Token(testTenant, testApp, "s3cret-value")
			if err != nil {
				t.Error(err)
			}
			got[i] = tok
		})
	}
	wg.Wait()
	if n := f.TokenAsks(); n != 1 {
		t.Fatalf("%d token requests for 32 calls at once, want 1", n)
	}
	for _, tok := range got {
		if tok != got[0] || tok == "" {
			t.Fatalf("tokens %v, want one", got)
		}
	}
	if _, err := tokens.Token(testTenant, testApp, "s3cret-value"); err != nil || f.TokenAsks() != 1 {
		t.Errorf("a later call asked again (%d asks): %v", f.TokenAsks(), err)
	}

	f.ExpiresIn(240) // within the five minutes: replaced at each use
	short := &teams.Tokens{LoginURL: f.LoginURL}
	for range 2 {
		if _, err := short.Token(testTenant, testApp, "s3cret-value"); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.TokenAsks(); n != 3 {
		t.Errorf("%d token requests, want 3: a token about to expire is replaced", n)
	}

	_, err := tokens.Token(testTenant, testApp, "wrong-secret")
	if err == nil || !teams.Permanent(err) {
		t.Errorf("a refused secret: %v (permanent %v)", err, teams.Permanent(err))
	}
}
