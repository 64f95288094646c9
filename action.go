package arbiter

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/arbiterhq/arbiter/internal/jcs"
)

// An action is the tool call a task asks about: "may the agent call
// issue_refund with these arguments?". The create states it; the server
// fixes its digest, the SHA-256 of the RFC 8785 (JCS) canonical form of
// {"args": …, "name": …}; every decision on the task records the action it
// approved, which a reviewer may have edited in the fields the create
// marked editable, and SDKs, adapters and the gateway run only a call whose
// digest is the approved one. Arguments are kept in their canonical form,
// so that whoever reads them computes the digest the server did.

// Limits on a create's action.
const (
	MaxActionNameChars   = 200      // characters in action.name
	MaxActionArgsBytes   = 64 << 10 // action.args, in canonical form
	MaxActionSchemaBytes = 64 << 10 // action.schema, compacted
	MaxActionArgsDepth   = 32       // levels of arrays and objects in action.args
	MaxEditableFields    = 64       // entries in action.editable
)

// DigestPrefix starts every action digest: the hash it is, then its
// lowercase hex.
const DigestPrefix = jcs.DigestPrefix

// TaskAction is a task's proposed action, as its create gave it, with its
// digest. Args is a JSON object in canonical form; Schema, when present, is
// the JSON Schema Args satisfies (and every edit must); Editable names the
// members of Args a reviewer may change before approving.
type TaskAction struct {
	Name     string          `json:"name"`
	Args     json.RawMessage `json:"args"`
	Schema   json.RawMessage `json:"schema,omitempty"`
	Editable []string        `json:"editable,omitempty"`
	Digest   string          `json:"digest"`
}

// ApprovedAction is the action a decision bound itself to: the proposed
// one, or the one a reviewer edited. Edited is true only when the args
// differ from the proposal's; Patch is then the RFC 6902 JSON Patch from
// the proposed args to these.
type ApprovedAction struct {
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args"`
	Digest string          `json:"digest"`
	Edited bool            `json:"edited"`
	// ProposedDigest is the digest of the action the create proposed.
	ProposedDigest string    `json:"proposed_digest"`
	Patch          []PatchOp `json:"patch,omitempty"`
	EditedBy       *string   `json:"edited_by,omitempty"`
}

// PatchOp is one operation of an RFC 6902 JSON Patch. An edit only ever
// replaces members of the args' top level, so its patches hold "replace"
// operations alone, in the order of the members' names.
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// ActionEdit is an edit of a task's action by a reviewer: the edited args
// (canonical) and their digest, and who made it.
type ActionEdit struct {
	Args     json.RawMessage `json:"args"`
	Digest   string          `json:"digest"`
	PersonID string          `json:"person_id,omitempty"`
	Reviewer string          `json:"reviewer,omitempty"`
}

// actionRequest is the wire form of a create's action.
type actionRequest struct {
	Name     *string         `json:"name"`
	Args     json.RawMessage `json:"args"`
	Schema   json.RawMessage `json:"schema" null:"refuse"`
	Editable []*string       `json:"editable" null:"refuse"`
}

var actionTypeErrors = map[string]string{
	"name":     "action.name must be a string: the tool's name.",
	"schema":   "action.schema must be a JSON Schema: a JSON object.",
	"editable": "action.editable must be an array of names of members of action.args.",
}

// inAction returns a decoding error of the action as one about its field:
// "action.name" rather than "name", and "action" when it names none.
func inAction(err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Code != EINVALID {
		return err
	}
	named := *e
	switch {
	case e.Field == "":
		named.Field = "action"
	case !strings.HasPrefix(e.Field, "action."):
		named.Field = "action." + e.Field
		if strings.HasPrefix(e.Message, e.Field+" ") {
			named.Message = "action." + e.Message
		}
	}
	return &named
}

// errActionArgs is the error of args that are not a JSON object.
var errActionArgs = FieldErrorf("action.args", "action.args is required: a JSON object of the tool's arguments.")

// ParseAction decodes and checks a create's action: a name, args that are
// a JSON object (I-JSON, within the limits above), an optional schema that
// compiles (JSON Schema 2020-12 unless it names another draft; no remote
// references) and that the args satisfy, and editable naming members of
// args, each once. It returns the action with its args in canonical form
// and its digest. Every failure is an EINVALID *Error naming the field at
// fault: "action", "action.name", "action.args", "action.schema" or
// "action.editable".
func ParseAction(raw json.RawMessage) (*TaskAction, error) {
	var req actionRequest
	if err := decodeStrict(raw, &req, actionTypeErrors, "action"); err != nil {
		return nil, inAction(err)
	}
	a := &TaskAction{}
	switch {
	case req.Name == nil || strings.TrimSpace(*req.Name) == "":
		return nil, FieldErrorf("action.name", "action.name is required: the name of the tool to call.")
	case utf8.RuneCountInString(*req.Name) > MaxActionNameChars:
		return nil, FieldErrorf("action.name", "action.name must be at most %d characters.", MaxActionNameChars)
	case !isText(*req.Name) || strings.ContainsFunc(*req.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return nil, FieldErrorf("action.name", "action.name must be text without control characters.")
	}
	a.Name = *req.Name

	args, err := canonicalArgs("action.args", req.Args)
	if err != nil {
		return nil, err
	}
	a.Args = args

	if len(req.Schema) > 0 {
		schema, err := compileActionSchema(req.Schema)
		if err != nil {
			return nil, err
		}
		a.Schema = schema.text
		if err := schema.check("action.args", a.Args); err != nil {
			return nil, err
		}
	}

	if req.Editable != nil {
		members, _ := topLevelKeys(a.Args)
		if len(req.Editable) > MaxEditableFields {
			return nil, FieldErrorf("action.editable", "action.editable may name at most %d members.", MaxEditableFields)
		}
		for i, name := range req.Editable {
			switch {
			case name == nil:
				return nil, FieldErrorf("action.editable", "action.editable must hold strings only; entry %d is null.", i)
			case !members[*name]:
				return nil, FieldErrorf("action.editable", "action.editable names %q, which is not a member of action.args.", *name)
			case slices.Contains(a.Editable, *name):
				return nil, FieldErrorf("action.editable", "action.editable names %q twice.", *name)
			}
			a.Editable = append(a.Editable, *name)
		}
	}
	a.Digest = ActionDigest(a.Name, a.Args)
	return a, nil
}

// canonicalArgs returns raw, which must be a JSON object, in canonical
// form, or an EINVALID error about field.
func canonicalArgs(field string, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		if field == "action.args" {
			return nil, errActionArgs
		}
		return nil, FieldErrorf(field, "%s must be a JSON object of the tool's arguments.", field)
	}
	if JSONDepth(raw) > MaxActionArgsDepth {
		return nil, FieldErrorf(field, "%s must nest arrays and objects at most %d levels deep.", field, MaxActionArgsDepth)
	}
	canonical, err := jcs.Canonicalize(raw)
	if err != nil {
		var e *jcs.Error
		if errors.As(err, &e) {
			return nil, FieldErrorf(field, "%s has no canonical form (RFC 8785): %s.", field, e.Reason)
		}
		return nil, FieldErrorf(field, "%s has no canonical form (RFC 8785).", field)
	}
	if len(canonical) > MaxActionArgsBytes {
		return nil, FieldErrorf(field, "%s must be at most %d bytes of JSON.", field, MaxActionArgsBytes)
	}
	return canonical, nil
}

// ActionDigest returns the digest of the action name(args): "sha256:" and
// the lowercase hex SHA-256 of the canonical form of {"args": args,
// "name": name}. args must be canonical already.
func ActionDigest(name string, args json.RawMessage) string {
	return jcs.ActionDigest(name, args)
}

// CheckEditVerdicts checks a create's edit_verdicts against its action and
// allowed verdicts, and returns the verdicts that allow an edit: the given
// ones, or the first allowed verdict when none are given. A task whose
// action has no editable members allows no edit, and takes none.
func CheckEditVerdicts(given []string, a *TaskAction, allowed []string) ([]string, error) {
	if a == nil || len(a.Editable) == 0 {
		if given != nil {
			return nil, FieldErrorf("edit_verdicts", "edit_verdicts goes with an action whose editable names the members a reviewer may change.")
		}
		return nil, nil
	}
	if given == nil {
		return allowed[:1:1], nil
	}
	if len(given) == 0 {
		return nil, FieldErrorf("edit_verdicts", "edit_verdicts must name at least one of allowed_verdicts.")
	}
	var out []string
	for _, v := range given {
		if !slices.Contains(allowed, v) {
			return nil, FieldErrorf("edit_verdicts", "edit_verdicts names %q, which is not one of allowed_verdicts.", v)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// Approve returns the action a decision approves when it gives editedArgs
// (nil for none) for the task's current action cur (the proposal, or the
// edit in force): cur as it is when editedArgs is nil or changes nothing,
// else the edit. The proposal p gives the schema and the editable members:
// editedArgs must be a JSON object with the same members as cur's args,
// differing only in editable ones, and satisfy the schema. A change makes
// the answer Edited, with the patch from p's args. Every failure is an
// EINVALID *Error naming the field "args".
func (p *TaskAction) Approve(cur ApprovedAction, editedArgs json.RawMessage) (ApprovedAction, error) {
	if editedArgs == nil {
		return cur, nil
	}
	if len(p.Editable) == 0 {
		return ApprovedAction{}, FieldErrorf("args", "This task's action has no editable arguments.")
	}
	args, err := canonicalArgs("args", editedArgs)
	if err != nil {
		return ApprovedAction{}, err
	}
	if bytes.Equal(args, cur.Args) {
		return cur, nil
	}
	// Only editable members may differ, and none may come or go.
	before, err := objectMembers(cur.Args)
	if err != nil {
		return ApprovedAction{}, err
	}
	after, err := objectMembers(args)
	if err != nil {
		return ApprovedAction{}, err
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			return ApprovedAction{}, FieldErrorf("args", "The edit adds %q, which the action does not have; only its editable members may change.", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(before)) {
		value, ok := after[name]
		switch {
		case !ok:
			return ApprovedAction{}, FieldErrorf("args", "The edit leaves out %q; send every member of the action's args.", name)
		case !bytes.Equal(value, before[name]) && !slices.Contains(p.Editable, name):
			return ApprovedAction{}, FieldErrorf("args", "The edit changes %q, which is not editable; editable: %s.", name, strings.Join(p.Editable, ", "))
		}
	}
	if len(p.Schema) > 0 {
		schema, err := compileActionSchema(p.Schema)
		if err != nil {
			return ApprovedAction{}, err
		}
		if err := schema.check("args", args); err != nil {
			return ApprovedAction{}, err
		}
	}
	out := ApprovedAction{Name: p.Name, Args: args, Digest: ActionDigest(p.Name, args), ProposedDigest: p.Digest}
	if out.Digest != p.Digest {
		out.Edited = true
		out.Patch, err = ArgsPatch(p.Args, args)
		if err != nil {
			return ApprovedAction{}, err
		}
	}
	return out, nil
}

// Proposed returns the proposal as an approved action, unedited.
func (p *TaskAction) Proposed() ApprovedAction {
	return ApprovedAction{Name: p.Name, Args: p.Args, Digest: p.Digest, ProposedDigest: p.Digest}
}

// WithEdit returns the action in force after edit e of the proposal p
// (nil for none): e's args, with the patch from p's.
func (p *TaskAction) WithEdit(e *ActionEdit) (ApprovedAction, error) {
	if e == nil || e.Digest == p.Digest {
		return p.Proposed(), nil
	}
	patch, err := ArgsPatch(p.Args, e.Args)
	if err != nil {
		return ApprovedAction{}, err
	}
	out := ApprovedAction{Name: p.Name, Args: e.Args, Digest: e.Digest, Edited: true, ProposedDigest: p.Digest, Patch: patch}
	if e.PersonID != "" {
		by := e.PersonID
		out.EditedBy = &by
	}
	return out, nil
}

// Edit returns the action as an edit by a person, to keep: nil when it is
// not Edited.
func (a ApprovedAction) Edit(personID, reviewer string) *ActionEdit {
	if !a.Edited {
		return nil
	}
	return &ActionEdit{Args: a.Args, Digest: a.Digest, PersonID: personID, Reviewer: reviewer}
}

// ArgsPatch returns the RFC 6902 JSON Patch from one canonical args object
// to another with the same members: a "replace" of each top-level member
// whose value differs, in the order of the members' names.
func ArgsPatch(from, to json.RawMessage) ([]PatchOp, error) {
	before, err := objectMembers(from)
	if err != nil {
		return nil, err
	}
	after, err := objectMembers(to)
	if err != nil {
		return nil, err
	}
	var ops []PatchOp
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if old, ok := before[name]; !ok || !bytes.Equal(old, after[name]) {
			op := "replace"
			if !ok {
				op = "add"
			}
			ops = append(ops, PatchOp{Op: op, Path: "/" + escapePointer(name), Value: after[name]})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[name]; !ok {
			ops = append(ops, PatchOp{Op: "remove", Path: "/" + escapePointer(name)})
		}
	}
	return ops, nil
}

// escapePointer escapes a member name as a JSON Pointer (RFC 6901) token.
func escapePointer(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

// objectMembers returns the members of a canonical JSON object, each value
// as its canonical text.
func objectMembers(obj json.RawMessage) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil || m == nil {
		return nil, FieldErrorf("args", "args must be a JSON object.")
	}
	return m, nil
}

// EditableField is one member of an action's args a reviewer may change,
// and how a form asks for it, from the action's schema: Kind is "number",
// "integer", "string", "boolean", "enum" (a string from Enum) or "json"
// (any JSON, for everything else); Value is the member's current value as
// canonical JSON.
type EditableField struct {
	Name     string
	Kind     string
	Enum     []string
	Required bool
	Value    json.RawMessage
}

// Parse returns the JSON of what a form gave for the member: the text as
// a string, a number's or an integer's digits, true or false, an enum's
// choice (one of Enum), or any JSON for the other kinds. Returns EINVALID
// (field "args") naming the member otherwise; the schema's rules are the
// decision's to check.
func (f EditableField) Parse(text string) (json.RawMessage, error) {
	bad := func(what string) error {
		return FieldErrorf("args", "%s must be %s.", f.Name, what)
	}
	switch f.Kind {
	case EditString:
		return json.Marshal(text)
	case EditEnum:
		if !slices.Contains(f.Enum, text) {
			return nil, bad("one of " + strings.Join(f.Enum, ", "))
		}
		return json.Marshal(text)
	case EditBoolean:
		if text != "true" && text != "false" {
			return nil, bad("true or false")
		}
		return json.RawMessage(text), nil
	case EditNumber, EditInteger:
		text = strings.TrimSpace(text)
		n, err := strconv.ParseFloat(text, 64)
		if err != nil || !json.Valid([]byte(text)) {
			return nil, bad("a number")
		}
		if f.Kind == EditInteger && n != math.Trunc(n) {
			return nil, bad("a whole number")
		}
		return json.RawMessage(text), nil
	}
	text = strings.TrimSpace(text)
	if !json.Valid([]byte(text)) {
		return nil, bad("JSON")
	}
	return json.RawMessage(text), nil
}

// Edit field kinds.
const (
	EditNumber  = "number"
	EditInteger = "integer"
	EditString  = "string"
	EditBoolean = "boolean"
	EditEnum    = "enum"
	EditJSON    = "json"
)

// EditableFields returns the editable members of the action cur (the one
// in force) as a form asks for them, in the order the proposal p names
// them; their kinds come from p's schema's "properties".
func (p *TaskAction) EditableFields(cur ApprovedAction) []EditableField {
	values, _ := objectMembers(cur.Args)
	var props map[string]json.RawMessage
	var required []string
	if len(p.Schema) > 0 {
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if json.Unmarshal(p.Schema, &s) == nil {
			props, required = s.Properties, s.Required
		}
	}
	out := make([]EditableField, 0, len(p.Editable))
	for _, name := range p.Editable {
		f := EditableField{Name: name, Kind: EditJSON, Value: values[name], Required: slices.Contains(required, name)}
		f.Kind, f.Enum = fieldKind(props[name], values[name])
		out = append(out, f)
	}
	return out
}

// fieldKind reads a property's schema: an enum of strings, or one type of
// number, integer, string or boolean (alone or with "null"); anything else
// is edited as JSON. Without a schema the current value's JSON type says.
func fieldKind(prop, value json.RawMessage) (string, []string) {
	if len(prop) == 0 {
		switch {
		case len(value) == 0:
			return EditJSON, nil
		case value[0] == '"':
			return EditString, nil
		case value[0] == 't' || value[0] == 'f':
			return EditBoolean, nil
		case value[0] == '-' || value[0] >= '0' && value[0] <= '9':
			return EditNumber, nil
		}
		return EditJSON, nil
	}
	var s struct {
		Type json.RawMessage   `json:"type"`
		Enum []json.RawMessage `json:"enum"`
	}
	if json.Unmarshal(prop, &s) != nil {
		return EditJSON, nil
	}
	if len(s.Enum) > 0 {
		var names []string
		for _, e := range s.Enum {
			var v string
			if json.Unmarshal(e, &v) != nil {
				return EditJSON, nil
			}
			names = append(names, v)
		}
		return EditEnum, names
	}
	var one string
	if json.Unmarshal(s.Type, &one) != nil {
		var several []string
		if json.Unmarshal(s.Type, &several) != nil || len(several) != 2 || !slices.Contains(several, "null") {
			return EditJSON, nil
		}
		one = several[0]
		if one == "null" {
			one = several[1]
		}
	}
	switch one {
	case EditNumber, EditInteger, EditString, EditBoolean:
		return one, nil
	}
	return EditJSON, nil
}

// SimpleEdit reports whether every editable member is a number, an
// integer, a string, a boolean or an enum, which a plain form (a Slack
// modal) can ask for.
func SimpleEdit(fields []EditableField) bool {
	for _, f := range fields {
		if f.Kind == EditJSON {
			return false
		}
	}
	return len(fields) > 0
}

// actionSchema is a compiled schema and its canonical text.
type actionSchema struct {
	text     json.RawMessage
	compiled *jsonschema.Schema
}

// schemaCache keeps compiled schemas by their canonical text, so that the
// creates of one tool and the edits of its tasks compile its schema once.
// It holds at most maxCachedSchemas and starts again when full.
var schemaCache = struct {
	sync.Mutex
	m map[string]*jsonschema.Schema
}{m: map[string]*jsonschema.Schema{}}

const maxCachedSchemas = 256

// schemaResource is the name a schema compiles under; it appears in no
// answer.
const schemaResource = "arbiter:action-schema.json"

// compileActionSchema compiles raw, a JSON Schema object, and keeps it in
// canonical form, so that the same schema written another way is the same.
// Returns an EINVALID error in the field "action.schema" when it is not
// one, is too large, or does not compile (remote references are refused).
func compileActionSchema(raw json.RawMessage) (*actionSchema, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, FieldErrorf("action.schema", "action.schema must be a JSON Schema: a JSON object.")
	}
	if JSONDepth(raw) > MaxContextDepth {
		return nil, FieldErrorf("action.schema", "action.schema must nest arrays and objects at most %d levels deep.", MaxContextDepth)
	}
	text, err := jcs.Canonicalize(raw)
	if err != nil {
		return nil, FieldErrorf("action.schema", "action.schema must be a JSON Schema: a JSON object (I-JSON).")
	}
	if len(text) > MaxActionSchemaBytes {
		return nil, FieldErrorf("action.schema", "action.schema must be at most %d bytes of JSON.", MaxActionSchemaBytes)
	}
	schemaCache.Lock()
	compiled, ok := schemaCache.m[string(text)]
	schemaCache.Unlock()
	if ok {
		return &actionSchema{text: text, compiled: compiled}, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return nil, FieldErrorf("action.schema", "action.schema must be a JSON Schema: a JSON object.")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// The compiler reads file:// references by default: a $ref or
	// $schema naming anything outside the schema (but the drafts'
	// metaschemas, which it holds) must fail instead.
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(schemaResource, doc); err != nil {
		return nil, FieldErrorf("action.schema", "action.schema does not compile.")
	}
	compiled, err = c.Compile(schemaResource)
	if err != nil {
		return nil, FieldErrorf("action.schema", "action.schema does not compile: %s.", schemaErrorText(err))
	}
	schemaCache.Lock()
	if len(schemaCache.m) >= maxCachedSchemas {
		clear(schemaCache.m)
	}
	schemaCache.m[string(text)] = compiled
	schemaCache.Unlock()
	return &actionSchema{text: text, compiled: compiled}, nil
}

// check returns an EINVALID error about field unless args satisfy the
// schema; it names the first place where they do not.
func (s *actionSchema) check(field string, args json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return FieldErrorf(field, "%s must be a JSON object.", field)
	}
	err = s.compiled.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return FieldErrorf(field, "%s does not satisfy action.schema.", field)
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	where := "/" + strings.Join(leaf.InstanceLocation, "/")
	if where == "/" {
		where = "the top level"
	}
	return FieldErrorf(field, "%s does not satisfy action.schema at %s: %s.", field, where, strings.TrimSuffix(leaf.ErrorKind.LocalizedString(schemaPrinter), "."))
}

// refuseLoader loads no schema: an action's schema stands alone.
type refuseLoader struct{}

// Load refuses url.
func (refuseLoader) Load(url string) (any, error) {
	return nil, errors.New("an action's schema may not refer to anything outside itself")
}

// schemaPrinter words the schema's validation errors.
var schemaPrinter = message.NewPrinter(language.English)

// schemaErrorText is the compile error's sentence without the internal
// resource name.
func schemaErrorText(err error) string {
	s := strings.ReplaceAll(err.Error(), schemaResource, "action.schema")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.TrimSuffix(s, ".")
}
