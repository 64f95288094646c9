package main

import "testing"

// TestGCPercentFor: a small live heap keeps gcPercent; a large one lets the
// heap grow by at most gcHeadroom, never below minGCPercent.
func TestGCPercentFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, gcPercent},
		{5 << 20, gcPercent},
		{gcHeadroom / 4, gcPercent},
		{gcHeadroom, 100},
		{100 << 20, 30},
		{180 << 20, minGCPercent},
		{4 << 30, minGCPercent},
	} {
		got := gcPercentFor(tc.live)
		if got != tc.want {
			t.Errorf("gcPercentFor(%d MB) = %d, want %d", tc.live>>20, got, tc.want)
		}
		if growth := tc.live * uint64(got) / 100; got > minGCPercent && got < gcPercent && growth > gcHeadroom {
			t.Errorf("gcPercentFor(%d MB) = %d lets the heap grow %d MB", tc.live>>20, got, growth>>20)
		}
	}
}
