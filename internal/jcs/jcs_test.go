package jcs_test

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/jcs"
)

// vectors is testdata/jcs/vectors.json, which the SDKs' tests read too.
type vectors struct {
	Canonical []struct{ Name, Input, Canonical string }
	Refused   []struct{ Name, Input string }
}

func readVectors(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile("../../testdata/jcs/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Canonical) == 0 || len(v.Refused) == 0 {
		t.Fatal("no vectors read")
	}
	return v
}

func TestCanonicalize_Vectors(t *testing.T) {
	for _, c := range readVectors(t).Canonical {
		t.Run(c.Name, func(t *testing.T) {
			got, err := jcs.Canonicalize([]byte(c.Input))
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if string(got) != c.Canonical {
				t.Errorf("Canonicalize =\n%s\nwant\n%s", got, c.Canonical)
			}
			// The canonical form is its own canonical form.
			again, err := jcs.Canonicalize(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("Canonicalize(canonical) = %s, %v; want it unchanged", again, err)
			}
		})
	}
}

func TestCanonicalize_RefusesWhatIsNotIJSON(t *testing.T) {
	for _, c := range readVectors(t).Refused {
		t.Run(c.Name, func(t *testing.T) {
			got, err := jcs.Canonicalize([]byte(c.Input))
			var e *jcs.Error
			if !errors.As(err, &e) {
				t.Fatalf("Canonicalize(%q) = %s, %v; want a *jcs.Error", c.Input, got, err)
			}
		})
	}
}

func TestCanonicalize_RefusesInvalidUTF8AndDeepNesting(t *testing.T) {
	for name, in := range map[string]string{
		"invalid UTF-8":              "\"\xff\"",
		"an encoded surrogate":       "\"\xed\xa0\x80\"",
		"invalid UTF-8 after escape": "\"\\n\xff\"",
		"deep nesting":               strings.Repeat("[", jcs.MaxDepth+1) + strings.Repeat("]", jcs.MaxDepth+1),
		"empty":                      "",
		"truncated escape":           `"\u12`,
	} {
		if got, err := jcs.Canonicalize([]byte(in)); err == nil {
			t.Errorf("%s: Canonicalize = %s, want an error", name, got)
		}
	}
	ok := strings.Repeat("[", jcs.MaxDepth) + strings.Repeat("]", jcs.MaxDepth)
	if _, err := jcs.Canonicalize([]byte(ok)); err != nil {
		t.Errorf("nesting at MaxDepth: %v", err)
	}
}

// TestAppendNumber_Vectors checks every line of testdata/jcs/numbers.txt:
// the RFC's Appendix B values and 5,000 doubles as ECMAScript writes
// them (generate-numbers.mjs beside it).
func TestAppendNumber_Vectors(t *testing.T) {
	f, err := os.Open("../../testdata/jcs/numbers.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		bitsHex, want, ok := strings.Cut(sc.Text(), ",")
		raw, err := hex.DecodeString(bitsHex)
		if !ok || err != nil || len(raw) != 8 {
			t.Fatalf("bad line %q", sc.Text())
		}
		x := math.Float64frombits(binary.BigEndian.Uint64(raw))
		got, err := jcs.AppendNumber(nil, x)
		if err != nil || string(got) != want {
			t.Errorf("AppendNumber(%s) = %s, %v; want %s", bitsHex, got, err, want)
		}
		lines++
	}
	if lines < 5000 {
		t.Fatalf("read %d vectors, want 5000", lines)
	}
}

func TestAppendNumber_RefusesNonFinite(t *testing.T) {
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := jcs.AppendNumber(nil, x); !errors.Is(err, jcs.ErrNotFinite) {
			t.Errorf("AppendNumber(%v) error = %v, want ErrNotFinite", x, err)
		}
	}
}

func TestCompareUTF16(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int // sign
	}{
		{"a", "b", -1},
		{"a", "a", 0},
		{"a", "ab", -1},
		{"\U0001F600", "\uFB33", -1}, // a surrogate pair sorts before U+E000–U+FFFF
		{"\uFB33", "\U0001F600", 1},
		{"\U0001F600", "\U0001F601", -1},
		{"\u00f6", "\u20ac", -1},
	} {
		got := jcs.CompareUTF16(c.a, c.b)
		if (got < 0) != (c.want < 0) || (got > 0) != (c.want > 0) {
			t.Errorf("CompareUTF16(%q, %q) = %d, want sign %d", c.a, c.b, got, c.want)
		}
	}
}
