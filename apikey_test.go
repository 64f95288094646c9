package arbiter_test

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestNormalizeKeyName(t *testing.T) {
	if got, err := arbiter.NormalizeKeyName("  ci deploy  "); err != nil || got != "ci deploy" {
		t.Errorf(`NormalizeKeyName("  ci deploy  ") = %q, %v`, got, err)
	}
	if got, err := arbiter.NormalizeKeyName(strings.Repeat("é", arbiter.MaxKeyNameChars)); err != nil || got == "" {
		t.Errorf("a name of exactly %d characters: %v", arbiter.MaxKeyNameChars, err)
	}
	for _, bad := range []string{"", "   ", strings.Repeat("x", arbiter.MaxKeyNameChars+1), "a\x00b", "a\xffb"} {
		if _, err := arbiter.NormalizeKeyName(bad); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("NormalizeKeyName(%q) = %v, want EINVALID", bad, err)
		}
	}
}

func TestCheckDailyCap(t *testing.T) {
	for _, ok := range []int{0, 1, arbiter.DefaultDailyTaskCap, arbiter.MaxDailyTaskCap} {
		if err := arbiter.CheckDailyCap(ok); err != nil {
			t.Errorf("CheckDailyCap(%d) = %v", ok, err)
		}
	}
	for _, bad := range []int{-1, arbiter.MaxDailyTaskCap + 1, 99999999999} {
		if err := arbiter.CheckDailyCap(bad); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("CheckDailyCap(%d) = %v, want EINVALID", bad, err)
		}
	}
}
