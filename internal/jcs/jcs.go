// Package jcs writes JSON text in the JSON Canonicalization Scheme of RFC
// 8785: no insignificant whitespace, object members sorted by their names'
// UTF-16 code units, strings escaped as ECMAScript's JSON.stringify escapes
// them, and numbers written as ECMAScript writes an IEEE-754 double. Two
// JSON texts that mean the same data have the same canonical form, so a
// hash of the form identifies the data.
//
// The input must be I-JSON (RFC 7493), which RFC 8785 requires: valid
// UTF-8, no lone surrogate escapes, no member name twice in one object,
// and numbers a double holds. Integers beyond ±(2^53−1) written without a
// fraction or an exponent are refused rather than rounded, so that no
// canonical form silently differs from the value its writer meant (I-JSON
// §2.2: send them as strings).
package jcs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds how deeply the text may nest arrays and objects, so that
// no input exhausts the stack.
const MaxDepth = 1000

// maxSafeInteger is 2^53−1, the largest integer every double above it
// cannot tell from its neighbours.
const maxSafeInteger = 1<<53 - 1

// Error is why a text has no canonical form: Offset is the byte at fault.
type Error struct {
	Offset int
	Reason string
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("%s (at byte %d)", e.Reason, e.Offset)
}

// ErrNotFinite is returned by AppendNumber for NaN and the infinities,
// which JSON cannot hold.
var ErrNotFinite = errors.New("NaN and infinite numbers have no JSON form")

// Canonicalize returns the canonical form of the JSON text, or an *Error
// saying why it has none.
func Canonicalize(text []byte) ([]byte, error) {
	return Append(make([]byte, 0, len(text)), text)
}

// Append appends the canonical form of the JSON text to dst.
func Append(dst, text []byte) ([]byte, error) {
	p := parser{s: text}
	p.space()
	out, err := p.value(dst)
	if err != nil {
		return nil, err
	}
	if p.space(); p.i != len(p.s) {
		return nil, p.fail("more JSON after the value")
	}
	return out, nil
}

// parser reads JSON text and writes its canonical form.
type parser struct {
	s     []byte
	i     int
	depth int
}

func (p *parser) fail(reason string) error { return &Error{Offset: p.i, Reason: reason} }

func (p *parser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value writes the value at p.i.
func (p *parser) value(dst []byte) ([]byte, error) {
	if p.i >= len(p.s) {
		return nil, p.fail("the JSON ends too early")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(dst)
	case c == '[':
		return p.array(dst)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return AppendString(dst, s), nil
	case c == '-' || c >= '0' && c <= '9':
		return p.number(dst)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if len(p.s)-p.i >= len(lit) && string(p.s[p.i:p.i+len(lit)]) == lit {
			p.i += len(lit)
			return append(dst, lit...), nil
		}
	}
	return nil, p.fail("not a JSON value")
}

// enter counts a level of nesting.
func (p *parser) enter() error {
	if p.depth++; p.depth > MaxDepth {
		return p.fail(fmt.Sprintf("arrays and objects nest more than %d levels deep", MaxDepth))
	}
	return nil
}

func (p *parser) array(dst []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.i++ // [
	dst = append(dst, '[')
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		p.depth--
		return append(dst, ']'), nil
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		var err error
		p.space()
		if dst, err = p.value(dst); err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.s) {
			return nil, p.fail("the JSON ends inside an array")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			p.depth--
			return append(dst, ']'), nil
		default:
			return nil, p.fail("expected , or ] in an array")
		}
	}
}

// member is one member of an object being written: its name, and its
// value's canonical form at buf[start:end] of the object's buffer.
type member struct {
	name       string
	start, end int
}

func (p *parser) object(dst []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.i++ // {
	p.space()
	var members []member
	var buf []byte
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
	} else {
		for {
			p.space()
			if p.i >= len(p.s) || p.s[p.i] != '"' {
				return nil, p.fail("expected a member name in an object")
			}
			at := p.i
			name, err := p.str()
			if err != nil {
				return nil, err
			}
			p.space()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return nil, p.fail("expected : after a member name")
			}
			p.i++
			p.space()
			start := len(buf)
			if buf, err = p.value(buf); err != nil {
				return nil, err
			}
			for _, m := range members {
				if m.name == name {
					return nil, &Error{Offset: at, Reason: fmt.Sprintf("the member %q appears twice in one object", name)}
				}
			}
			members = append(members, member{name: name, start: start, end: len(buf)})
			p.space()
			if p.i >= len(p.s) {
				return nil, p.fail("the JSON ends inside an object")
			}
			if p.s[p.i] == ',' {
				p.i++
				continue
			} else if p.s[p.i] == '}' {
				p.i++
				break
			}
			return nil, p.fail("expected , or } in an object")
		}
	}
	p.depth--
	slices.SortFunc(members, func(a, b member) int { return CompareUTF16(a.name, b.name) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, m.name)
		dst = append(dst, ':')
		dst = append(dst, buf[m.start:m.end]...)
	}
	return append(dst, '}'), nil
}

// str reads the string at p.i, which starts with a quote, and returns it
// decoded.
func (p *parser) str() (string, error) {
	p.i++ // "
	start := p.i
	// The common case: no escapes, ASCII or valid UTF-8, no control bytes.
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				return "", &Error{Offset: start, Reason: "a string is not valid UTF-8"}
			}
			return string(s), nil
		} else if c == '\\' || c < 0x20 {
			break
		}
		p.i++
	}
	out := append([]byte(nil), p.s[start:p.i]...)
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return "", &Error{Offset: start, Reason: "a string is not valid UTF-8"}
			}
			return string(out), nil
		case c < 0x20:
			return "", p.fail("a string holds a control character; escape it")
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			break
		}
		p.i++
		switch e := p.s[p.i]; e {
		case '"', '\\', '/':
			out = append(out, e)
			p.i++
		case 'b':
			out, p.i = append(out, '\b'), p.i+1
		case 'f':
			out, p.i = append(out, '\f'), p.i+1
		case 'n':
			out, p.i = append(out, '\n'), p.i+1
		case 'r':
			out, p.i = append(out, '\r'), p.i+1
		case 't':
			out, p.i = append(out, '\t'), p.i+1
		case 'u':
			r, ok := p.hex4(p.i + 1)
			if !ok {
				return "", p.fail(`a \u escape needs four hex digits`)
			}
			p.i += 5
			if utf16.IsSurrogate(r) {
				low, ok := p.hex4(p.i + 2)
				if r >= 0xDC00 || !ok || p.s[p.i] != '\\' || p.s[p.i+1] != 'u' || low < 0xDC00 || low > 0xDFFF {
					return "", p.fail("a string holds a lone surrogate escape, which is not Unicode text")
				}
				r = utf16.DecodeRune(r, low)
				p.i += 6
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", p.fail("a string holds an unknown escape")
		}
	}
	return "", p.fail("the JSON ends inside a string")
}

// hex4 reads four hex digits at i.
func (p *parser) hex4(i int) (rune, bool) {
	if i+4 > len(p.s) {
		return 0, false
	}
	var r rune
	for _, c := range p.s[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number reads the number at p.i, which must follow RFC 8259's grammar.
func (p *parser) number(dst []byte) ([]byte, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.s[p.i] == '-' {
		p.i++
	}
	intStart := p.i
	if n := digits(); n == 0 {
		return nil, p.fail("a number needs digits")
	} else if n > 1 && p.s[intStart] == '0' {
		return nil, &Error{Offset: intStart, Reason: "a number may not start with 0"}
	}
	integer := true
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		integer = false
		if digits() == 0 {
			return nil, p.fail("a number needs digits after its decimal point")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		integer = false
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.fail("a number needs digits in its exponent")
		}
	}
	text := string(p.s[start:p.i])
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, &Error{Offset: start, Reason: "a number is too large for a double"}
	}
	if integer && math.Abs(f) > maxSafeInteger {
		return nil, &Error{Offset: start, Reason: "an integer is beyond ±(2^53−1), where doubles lose digits; send it as a string"}
	}
	return AppendNumber(dst, f)
}

// AppendString appends s, which must be valid UTF-8, as a JSON string in
// canonical form: quotes and backslashes escaped, \b \t \n \f \r for those
// controls, \u00xx for the other controls, every other character as it is.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendNumber appends f as ECMAScript's Number.prototype.toString writes
// it (ECMA-262 Number::toString, which RFC 8785 §3.2.2.3 adopts): the
// shortest digits that read back as f, in plain notation from 1e-6 up to
// 1e21 and in exponent notation ("1e+21", "1.5e-7") outside it; -0 as 0.
// NaN and the infinities are ErrNotFinite.
func AppendNumber(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, ErrNotFinite
	}
	if f == 0 {
		return append(dst, '0'), nil
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// The shortest round-trip digits d1.d2…dk and the exponent e of
	// d1.d2…dk × 10^e; ECMAScript's n is e+1.
	var scratch [32]byte
	e := strconv.AppendFloat(scratch[:0], f, 'e', -1, 64)
	mant, exp := e, 0
	for i, c := range e {
		if c == 'e' {
			mant = e[:i]
			exp, _ = strconv.Atoi(string(e[i+1:]))
			break
		}
	}
	var digitsArr [24]byte
	digits := digitsArr[:0]
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	k, n := len(digits), exp+1
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst, nil
}

// CompareUTF16 compares a and b, valid UTF-8, as sequences of UTF-16 code
// units, the order RFC 8785 sorts member names in; it differs from the
// order of code points only where a character beyond U+FFFF (two units,
// the first from U+D800) meets one from U+E000 to U+FFFF.
func CompareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := firstUnit(ra), firstUnit(rb)
			if ua != ub {
				return int(ua) - int(ub)
			}
			// Both beyond U+FFFF with the same high surrogate: the low
			// ones order as the code points do.
			return int(ra) - int(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

// DigestPrefix begins every action digest.
const DigestPrefix = "sha256:"

// ActionDigest returns the digest of the action name(args), the one the
// server stores and the client checks: DigestPrefix and the lowercase hex
// SHA-256 of the canonical form of {"args": args, "name": name}. args must
// be canonical already.
func ActionDigest(name string, args []byte) string {
	buf := make([]byte, 0, len(args)+len(name)+32)
	buf = append(buf, `{"args":`...)
	buf = append(buf, args...)
	buf = append(buf, `,"name":`...)
	buf = AppendString(buf, name)
	buf = append(buf, '}')
	sum := sha256.Sum256(buf)
	return DigestPrefix + hex.EncodeToString(sum[:])
}
