package teams_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/teams"
	"github.com/arbiterhq/arbiter/teams/teamsfake"
)

const testApp = "1f0e2c7a-5b1d-4e8f-9a3c-7d6b5e4f3a21"

func verifier(f *teamsfake.Fake) *teams.Verifier {
	return &teams.Verifier{MetadataURL: f.MetadataURL, Issuer: f.Issuer, Leeway: time.Minute}
}

// TestVerifier: a token the Bot Framework signed for the bot and the
// activity's service URL verifies and names the bot; one expired past the
// leeway, of another issuer, signed by a key the metadata does not list,
// for another service URL, or not a bearer token is refused as
// unauthorized; one expired within the leeway is taken.
func TestVerifier(t *testing.T) {
	ctx := context.Background()
	f := teamsfake.New(t)
	v := verifier(f)
	t.Cleanup(v.Close)
	claims, err := v.Verify(ctx, f.Token(t, testApp), f.ServiceURL)
	if err != nil || !slices.Equal(claims.Audience, []string{testApp}) || claims.ServiceURL != f.ServiceURL {
		t.Fatalf("a right token: %+v, %v", claims, err)
	}
	if _, err := v.Verify(ctx, f.Token(t, testApp, teamsfake.Expired(30*time.Second)), f.ServiceURL); err != nil {
		t.Errorf("a token expired within the leeway: %v", err)
	}
	for name, c := range map[string]struct {
		auth, serviceURL string
	}{
		"Expired":           {f.Token(t, testApp, teamsfake.Expired(5*time.Minute)), f.ServiceURL},
		"WrongIssuer":       {f.Token(t, testApp, teamsfake.Issuer("https://login.microsoftonline.com/evil/v2.0")), f.ServiceURL},
		"BadSignature":      {f.Token(t, testApp, teamsfake.ForeignKey()), f.ServiceURL},
		"WrongServiceURL":   {f.Token(t, testApp, teamsfake.ServiceURL("https://evil.example/")), f.ServiceURL},
		"ActivityElsewhere": {f.Token(t, testApp), "https://evil.example/"},
		"NotBearer":         {"Basic dXNlcjpwYXNz", f.ServiceURL},
		"Empty":             {"", f.ServiceURL},
		"Garbage":           {"Bearer not.a.token", f.ServiceURL},
	} {
		if _, err := v.Verify(ctx, c.auth, c.serviceURL); !errors.Is(err, teams.ErrUnauthorized) {
			t.Errorf("%s: %v, want ErrUnauthorized", name, err)
		}
	}
}

// TestVerifier_ReadsNewKeys: after the Bot Framework rotates its signing
// key, a token signed with the new key verifies: a key id not seen makes
// the verifier read the key set again.
func TestVerifier_ReadsNewKeys(t *testing.T) {
	ctx := context.Background()
	f := teamsfake.New(t)
	v := verifier(f)
	t.Cleanup(v.Close)
	if _, err := v.Verify(ctx, f.Token(t, testApp), f.ServiceURL); err != nil {
		t.Fatal(err)
	}
	f.RotateKey(t)
	if _, err := v.Verify(ctx, f.Token(t, testApp), f.ServiceURL); err != nil {
		t.Errorf("a token of the rotated key: %v", err)
	}
}

// TestVerifier_KeysOutOfReach: when the OpenID metadata cannot be read,
// a token is neither taken nor called the caller's fault.
func TestVerifier_KeysOutOfReach(t *testing.T) {
	f := teamsfake.New(t)
	v := &teams.Verifier{MetadataURL: f.URL + "/nowhere", Issuer: f.Issuer}
	t.Cleanup(v.Close)
	if _, err := v.Verify(context.Background(), f.Token(t, testApp), f.ServiceURL); !errors.Is(err, teams.ErrKeysOutOfReach) {
		t.Errorf("Verify = %v, want ErrKeysOutOfReach", err)
	}
}
