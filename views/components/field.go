package components

import "strings"

// FormField is one labelled input of a form, as shown or as typed, with its
// help and, after a refused submit, the error that is about it. A field
// with an error says it is invalid and is described by the error beside
// it; the first such field of a page has Focus, so that the browser puts
// the focus, and the view, on it when the answer loads.
type FormField struct {
	ID, Name, Label, Value string
	// Help says what the field takes; Error why the value was refused.
	Help, Error string
	// Type is the input's type: "text" when empty.
	Type  string
	Focus bool
	// Options, when set, make the field a select of fixed choices.
	Options []Option
}

// Option is one choice of a select.
type Option struct{ Value, Label string }

// describedBy is the ids of the field's help and error, for
// aria-describedby; "" when it has neither.
func (f FormField) describedBy() string {
	var ids []string
	if f.Help != "" {
		ids = append(ids, f.ID+"-help")
	}
	if f.Error != "" {
		ids = append(ids, f.ID+"-error")
	}
	return strings.Join(ids, " ")
}

func (f FormField) inputType() string {
	if f.Type == "" {
		return "text"
	}
	return f.Type
}
