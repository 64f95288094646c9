package slack

import (
	"encoding/json"

	slackgo "github.com/slack-go/slack"

	"github.com/arbiterhq/arbiter"
)

// A task's action in Slack: the question shows the action in force with
// its digest, and every decision the message offers (a button, the select
// menu, the reason and edit modals) carries that digest, so that a click
// on a copy made before a reviewer's edit is refused rather than approve
// an action nobody showed. Where every editable member of the action is a
// number, a string, a boolean or an enum (arbiter.SimpleEdit), "Edit and
// approve" opens a modal of those members.

// ActionEdit is the "Edit and approve" button's action id, and
// CallbackEdit its modal's callback id.
const (
	ActionEdit   = "arbiter_edit"
	CallbackEdit = "arbiter_edit"
	// blockEditVerdict is the edit modal's verdict input; each member's
	// input's block id is blockArgPrefix and the member's name.
	blockEditVerdict = "edit_verdict"
	blockArgPrefix   = "arg:"
	actionArg        = "value"
)

// actionSection shows the action in force: its tool, its args as fields
// (as the context's are) and its digest, with a note when a reviewer
// edited it.
func actionSection(t *arbiter.Task, deskURL string) []slackgo.Block {
	cur, ok := t.CurrentAction()
	if !ok {
		return nil
	}
	head := "*Action* `" + fit(escape(cur.Name), 200, "…") + "` · digest `" + arbiter.ShortDigest(cur.Digest) + "`"
	if cur.Edited {
		head += " · edited by a reviewer; the votes restarted on it"
	}
	blocks := []slackgo.Block{section(head)}
	if fields := contextFields(cur.Args, deskURL); len(fields) > 0 {
		blocks = append(blocks, slackgo.NewSectionBlock(nil, fields, nil))
	}
	return blocks
}

// digestOf is the digest of t's action in force, "" without one.
func digestOf(t *arbiter.Task) string {
	if cur, ok := t.CurrentAction(); ok {
		return cur.Digest
	}
	return ""
}

// editButton is "Edit and approve" for a task whose action a plain modal
// can edit, nil otherwise (a blind audit takes no edit).
func editButton(t *arbiter.Task) slackgo.BlockElement {
	if t.Action == nil || t.AuditWaiting() || len(t.EditVerdicts) == 0 {
		return nil
	}
	cur, _ := t.CurrentAction()
	if !arbiter.SimpleEdit(t.Action.EditableFields(cur)) {
		return nil
	}
	label := "Edit and " + t.EditVerdicts[0]
	if len(t.EditVerdicts) > 1 {
		label = "Edit and decide"
	}
	return slackgo.NewButtonBlockElement(ActionEdit, EncodeValue(t.ID, cur.Digest, "edit"), plain(label))
}

// editMetadata is what the edit and reason modals carry back: the task,
// the digest the person saw, and where to answer them (the message's
// response URL, which a modal's submission lacks).
type editMetadata struct {
	TaskID      string `json:"task"`
	Digest      string `json:"digest,omitempty"`
	ResponseURL string `json:"response_url,omitempty"`
}

// modalMetadata encodes a modal's private metadata.
func modalMetadata(taskID, digest, responseURL string) string {
	b, _ := json.Marshal(editMetadata{TaskID: taskID, Digest: digest, ResponseURL: responseURL})
	return string(b)
}

// parseMetadata reads a modal's private metadata: what modalMetadata
// wrote, or a bare task id (a modal opened before actions).
func parseMetadata(s string) editMetadata {
	var m editMetadata
	if json.Unmarshal([]byte(s), &m) != nil {
		return editMetadata{TaskID: s}
	}
	return m
}

// EditModal is the "Edit and approve" modal of t: one input per editable
// member, filled with its value in force (a select for an enum or a
// boolean), and the verdict when more than one allows an edit.
func EditModal(t *arbiter.Task, responseURL string) slackgo.ModalViewRequest {
	cur, _ := t.CurrentAction()
	blocks := []slackgo.Block{section(fit(escape(t.Prompt), MaxSectionChars, "…")),
		section("*Action* `" + fit(escape(cur.Name), 200, "…") + "` · digest `" + arbiter.ShortDigest(cur.Digest) + "`")}
	if len(t.EditVerdicts) > 1 {
		opts := make([]*slackgo.OptionBlockObject, len(t.EditVerdicts))
		for i, v := range t.EditVerdicts {
			opts[i] = slackgo.NewOptionBlockObject(v, plain(v), nil)
		}
		sel := slackgo.NewOptionsSelectBlockElement(slackgo.OptTypeStatic, plain("Choose a verdict"), actionVerdict, opts...)
		sel.InitialOption = opts[0]
		blocks = append(blocks, slackgo.NewInputBlock(blockEditVerdict, plain("Verdict"), nil, sel))
	}
	for _, f := range t.Action.EditableFields(cur) {
		label, block := plain(f.Name), blockArgPrefix+f.Name
		var el slackgo.BlockElement
		switch f.Kind {
		case arbiter.EditEnum, arbiter.EditBoolean:
			choices := f.Enum
			if f.Kind == arbiter.EditBoolean {
				choices = []string{"true", "false"}
			}
			opts := make([]*slackgo.OptionBlockObject, len(choices))
			sel := slackgo.NewOptionsSelectBlockElement(slackgo.OptTypeStatic, plain("Choose"), actionArg)
			for i, c := range choices {
				opts[i] = slackgo.NewOptionBlockObject(c, plain(c), nil)
				if c == valueText(f) {
					sel.InitialOption = opts[i]
				}
			}
			sel.Options = opts
			el = sel
		default:
			in := slackgo.NewPlainTextInputBlockElement(plain(f.Kind), actionArg)
			in.InitialValue = valueText(f)
			el = in
		}
		input := slackgo.NewInputBlock(block, label, plain(f.Kind), el)
		input.Optional = !f.Required && f.Kind == arbiter.EditString
		blocks = append(blocks, input)
	}
	verdict := t.EditVerdicts[0]
	return slackgo.ModalViewRequest{
		Type: slackgo.VTModal, CallbackID: CallbackEdit, PrivateMetadata: modalMetadata(t.ID, cur.Digest, responseURL),
		Title: plain("Edit the action"), Submit: plain("Edit and " + fit(verdict, 60, "…")), Close: plain("Cancel"),
		Blocks: slackgo.Blocks{BlockSet: blocks[:min(len(blocks), MaxBlocks)]},
	}
}

// valueText is an editable member's value as a form shows it: a string
// as it is, anything else as its JSON.
func valueText(f arbiter.EditableField) string {
	var s string
	if json.Unmarshal(f.Value, &s) == nil {
		return s
	}
	return string(f.Value)
}

// EditOf reads the edit modal's submission for t: the verdict, and the
// action's args in force with the editable members as the person set
// them. A value that is not of its member's kind is an EINVALID error
// naming the member; the schema's rules are the decision's to check.
func EditOf(t *arbiter.Task, v slackgo.View) (verdict string, args json.RawMessage, err error) {
	cur, ok := t.CurrentAction()
	if !ok || v.State == nil || len(t.EditVerdicts) == 0 {
		return "", nil, arbiter.Errorf(arbiter.EINVALID, "This task's action cannot be edited here.")
	}
	verdict = t.EditVerdicts[0]
	if sel := v.State.Values[blockEditVerdict][actionVerdict].SelectedOption.Value; sel != "" {
		verdict = sel
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(cur.Args, &members); err != nil {
		return "", nil, err
	}
	for _, f := range t.Action.EditableFields(cur) {
		in := v.State.Values[blockArgPrefix+f.Name][actionArg]
		text := in.Value
		if f.Kind == arbiter.EditEnum || f.Kind == arbiter.EditBoolean {
			text = in.SelectedOption.Value
		}
		value, err := f.Parse(text)
		if err != nil {
			return "", nil, err
		}
		members[f.Name] = value
	}
	args, err = json.Marshal(members)
	return verdict, args, err
}
