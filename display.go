package arbiter

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Display is a create's hint of how reviewers see its context, for shapes
// the desk's conventions do not catch: which of the context's members show
// first, in order, and with which view. The desk shows the rest after them,
// as it would without a hint.
type Display struct {
	Fields []DisplayField `json:"fields"`
}

// DisplayField names one member of the context and, when View is not "",
// the view it gets (one of DisplayViews).
type DisplayField struct {
	Field string `json:"field"`
	View  string `json:"view,omitempty"`
}

// MaxDisplayFields is how many members a display hint may name.
const MaxDisplayFields = 16

// DisplayViews are the views a display hint may ask for: the desk's views,
// "tree" (the tree, whatever the value's shape) and "text" (a string as
// text, not a link, date or diff).
var DisplayViews = []string{"conversation", "tool-call", "image", "diff", "markdown", "link", "date", "money", "tree", "text"}

// displayRequest and displayFieldRequest are a display hint's wire form.
type displayRequest struct {
	Fields []json.RawMessage `json:"fields"`
}

type displayFieldRequest struct {
	Field *string `json:"field"`
	View  *string `json:"view" null:"refuse"`
}

// ParseDisplay decodes and checks a create's display hint against its
// context (compacted; nil when it has none): the context must be a JSON
// object holding every member the hint names, each named once, each view
// one of DisplayViews. Every failure is an EINVALID *Error in the field
// "display". An empty raw is no hint: nil.
func ParseDisplay(raw, context json.RawMessage) (*Display, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var req displayRequest
	if err := decodeStrict(raw, &req, map[string]string{"fields": errDisplayFields.Message}, "display"); err != nil {
		return nil, inDisplay(err)
	}
	if len(req.Fields) == 0 || len(req.Fields) > MaxDisplayFields {
		return nil, errDisplayFields
	}
	members, isObject := topLevelKeys(context)
	d := &Display{Fields: make([]DisplayField, len(req.Fields))}
	for i, rawField := range req.Fields {
		var f displayFieldRequest
		what := "display.fields[" + strconv.Itoa(i) + "]"
		err := decodeStrict(rawField, &f, map[string]string{"field": what + ".field must be a string.", "view": what + ".view must be a string."}, what)
		switch {
		case err != nil:
			return nil, inDisplay(err)
		case f.Field == nil || *f.Field == "":
			return nil, FieldErrorf("display", "%s.field is required: the name of a member of context.", what)
		case utf8.RuneCountInString(*f.Field) > MaxLabelChars || strings.IndexByte(*f.Field, 0) >= 0:
			return nil, FieldErrorf("display", "%s.field must be at most %d characters, without NUL.", what, MaxLabelChars)
		case f.View != nil && !slices.Contains(DisplayViews, *f.View):
			return nil, FieldErrorf("display", "%s.view must be one of %s.", what, strings.Join(DisplayViews, ", "))
		case !isObject:
			return nil, FieldErrorf("display", "display names members of context, which must be a JSON object.")
		case !members[*f.Field]:
			return nil, FieldErrorf("display", "%s.field %q is not a member of context.", what, *f.Field)
		}
		for _, prev := range d.Fields[:i] {
			if prev.Field == *f.Field {
				return nil, FieldErrorf("display", "display names %q twice.", *f.Field)
			}
		}
		d.Fields[i].Field = *f.Field
		if f.View != nil {
			d.Fields[i].View = *f.View
		}
	}
	return d, nil
}

// inDisplay names the field "display" in an EINVALID error about a part
// of it.
func inDisplay(err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Code != EINVALID {
		return err
	}
	named := *e
	named.Field = "display"
	return &named
}

// errDisplayFields is the EINVALID error of a display without its fields.
var errDisplayFields = FieldErrorf("display", "display.fields must be an array of 1 to %d {field, view} objects.", MaxDisplayFields)

// topLevelKeys returns the member names of a JSON object, and false when
// context is not one. It reads the top level only, skipping the values.
func topLevelKeys(context json.RawMessage) (map[string]bool, bool) {
	dec := json.NewDecoder(bytes.NewReader(context))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	keys := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		keys[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, false
		}
	}
	return keys, true
}
