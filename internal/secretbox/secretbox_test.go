package secretbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/secretbox"
)

func TestKeyring(t *testing.T) {
	oldKey, newKey := secretbox.NewKey(), secretbox.NewKey()
	old, err := secretbox.Parse(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := old.Seal("whsec_plain", "we_1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "whsec_plain") || !secretbox.IsSealed(sealed) {
		t.Fatalf("sealed = %q", sealed)
	}

	t.Run("OpensWithItsRow", func(t *testing.T) {
		if got, err := old.Open(sealed, "we_1"); err != nil || got != "whsec_plain" {
			t.Fatalf("Open = %q, %v", got, err)
		}
	})
	t.Run("RefusesAnotherRow", func(t *testing.T) {
		if _, err := old.Open(sealed, "we_2"); err == nil {
			t.Fatal("a value moved to another row opened")
		}
	})
	t.Run("RefusesAnAlteredValue", func(t *testing.T) {
		b := []byte(sealed)
		b[len(b)-3] ^= 1
		if _, err := old.Open(string(b), "we_1"); err == nil {
			t.Fatal("an altered value opened")
		}
	})
	t.Run("PlaintextReadsAsItIs", func(t *testing.T) {
		if got, err := old.Open("whsec_x", "we_1"); err != nil || got != "whsec_x" {
			t.Fatalf("Open = %q, %v", got, err)
		}
		var none *secretbox.Keyring
		if got, err := none.Open("whsec_x", "we_1"); err != nil || got != "whsec_x" {
			t.Fatalf("nil Open = %q, %v", got, err)
		}
		if _, err := none.Open(sealed, "we_1"); !errors.Is(err, secretbox.ErrNoKey) {
			t.Fatalf("nil Open of a sealed value = %v, want ErrNoKey", err)
		}
	})
	t.Run("RotationKeepsOldValuesAndResealsThem", func(t *testing.T) {
		ring, err := secretbox.Parse(newKey + "," + oldKey)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ring.Open(sealed, "we_1"); err != nil || got != "whsec_plain" {
			t.Fatalf("Open under the rotated ring = %q, %v", got, err)
		}
		if ring.Current(sealed) {
			t.Fatal("a value under the old key is current")
		}
		resealed, changed, err := ring.Reseal(sealed, "we_1")
		if err != nil || !changed || !ring.Current(resealed) {
			t.Fatalf("Reseal = %q, %v, %v", resealed, changed, err)
		}
		only, _ := secretbox.Parse(newKey)
		if got, err := only.Open(resealed, "we_1"); err != nil || got != "whsec_plain" {
			t.Fatalf("the resealed value under the new key alone = %q, %v", got, err)
		}
		if _, err := only.Open(sealed, "we_1"); !errors.Is(err, secretbox.ErrNoKey) {
			t.Fatalf("the old value without the old key = %v, want ErrNoKey", err)
		}
		if again, changed, _ := ring.Reseal(resealed, "we_1"); changed || again != resealed {
			t.Fatal("resealing a current value changed it")
		}
	})
	t.Run("ParseRefusesBadKeys", func(t *testing.T) {
		for _, s := range []string{"", "short", "not base64 at all!!", oldKey + ",AAAA"} {
			if _, err := secretbox.Parse(s); err == nil {
				t.Errorf("Parse(%q) succeeded", s)
			} else if strings.Contains(err.Error(), oldKey) {
				t.Errorf("Parse's error holds the key: %v", err)
			}
		}
	})
}
