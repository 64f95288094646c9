// Package jsonfields reads what Go's JSON decoder does not tell: a struct
// type's exact member names, and the member names of a JSON object as they
// are written, in order, repeats included. A strict decoder holds a body to
// exact field names with them.
package jsonfields

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// Go's decoder matches member names without regard to case and keeps the
// last of a repeated member, so a strict decoder reads the names once more,
// without decoding the values.

// Fields are the JSON member names of a struct type, numbered.
type Fields struct {
	Names []string
	Index map[string]int // name → its position in Names
	// NotNull[i] is set when Names[i] may not be null: its field is
	// tagged null:"refuse". Go's decoder takes null for a pointer as
	// leaving it out, which hides a null the schema forbids.
	NotNull []bool
}

// fieldsByType caches Of.
var fieldsByType sync.Map // reflect.Type → *Fields

// Of returns the JSON member names of struct type t, as its json
// tags (or field names) spell them, including those of embedded structs. A
// type that is not a struct has none.
func Of(t reflect.Type) *Fields {
	if f, ok := fieldsByType.Load(t); ok {
		return f.(*Fields)
	}
	f := &Fields{Index: map[string]int{}}
	f.add(t)
	fieldsByType.Store(t, f)
	return f
}

func (f *Fields) add(t reflect.Type) {
	if t.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		field := t.Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case field.Anonymous && name == "" && field.Type.Kind() == reflect.Struct:
			f.add(field.Type)
			continue
		case !field.IsExported():
			continue
		case name == "":
			name = field.Name
		}
		f.Index[name] = len(f.Names)
		f.Names = append(f.Names, name)
		f.NotNull = append(f.NotNull, field.Tag.Get("null") == "refuse")
	}
}

// EachObjectKey calls fn with each member name of the JSON object b holds,
// unescaped and in order, and its value's JSON text, and stops at fn's
// first error, which it returns. Values are skipped, not decoded; b
// holding no object has no names. b must be valid JSON (the decoder has
// checked it); should it not be, the names read before the fault are all
// fn sees.
func EachObjectKey(b []byte, fn func(key, value []byte) error) error {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	for i = SkipSpace(b, i+1); i < len(b) && b[i] == '"'; {
		end := stringEnd(b, i)
		if end < 0 {
			return nil
		}
		key := b[i+1 : end-1]
		if !plainASCII(key) { // escapes, or bytes the decoder would replace
			var s string
			if json.Unmarshal(b[i:end], &s) != nil {
				return nil
			}
			key = []byte(s)
		}
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil
		}
		start := SkipSpace(b, i+1)
		if i = ValueEnd(b, start); i < 0 {
			return nil
		}
		if err := fn(key, b[start:i]); err != nil {
			return err
		}
		if i = SkipSpace(b, i); i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
	}
	return nil
}

// plainASCII reports whether s is ASCII without backslashes: a JSON string
// body that reads as it is written.
func plainASCII(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || s[i] == '\\' {
			return false
		}
	}
	return true
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at b[i],
// or -1 when it does not end.
func stringEnd(b []byte, i int) int {
	// A plain loop: bytes.IndexAny builds its set on every call, which
	// cost more than the short strings of a task's context.
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return j + 1
		case '\\':
			j++ // the character it escapes
		}
	}
	return -1
}

// ValueEnd returns the index just past the JSON value starting at b[i], or
// -1 when it does not end.
func ValueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				if j = stringEnd(b, j); j < 0 {
					return -1
				}
				j-- // the loop steps past the closing quote
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(b)
}
