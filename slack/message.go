package slack

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"

	"github.com/arbiterhq/arbiter"
)

// Slack's limits on a message, and the share of them a question uses.
const (
	// MaxBlocks is Slack's limit on the blocks of a message.
	MaxBlocks = 50
	// MaxSectionChars is Slack's limit on a section's text.
	MaxSectionChars = 3000
	// MaxButtons is how many verdicts get a button each; past it, the
	// verdicts are a select menu.
	MaxButtons = 5
	// maxFields is Slack's limit on a section's fields.
	maxFields = 10
	// maxFieldChars bounds one context field as shown (Slack allows
	// 2,000): a question is read at a glance; the desk shows it all.
	maxFieldChars = 300
	// maxTextChars bounds the notification text beside the blocks.
	maxTextChars = 300
)

// The action ids of a question's elements, and the callback id of the
// "Add a reason" modal.
const (
	ActionDecide   = "arbiter_decide"
	ActionReason   = "arbiter_reason"
	ActionDesk     = "arbiter_desk"
	CallbackReason = "arbiter_reason"
	// The modal's inputs.
	blockVerdict, blockRationale   = "verdict", "rationale"
	actionVerdict, actionRationale = "verdict", "rationale"
)

// Message is a message to post: its blocks, and the text notifications
// and screen readers show.
type Message struct {
	Text   string
	Blocks []slackgo.Block
}

// EncodeValue is a decision button's value: the task, the digest of the
// action the message shows ("" for none) and the verdict, never a URL
// that decides. A task id holds no "@" and a digest's hex no "|", so the
// verdict may hold anything.
func EncodeValue(taskID, digest, verdict string) string {
	if hex, ok := strings.CutPrefix(digest, arbiter.DigestPrefix); ok {
		taskID += "@" + hex
	}
	return taskID + "|" + verdict
}

// DecodeValue splits a value EncodeValue made; a value without a digest
// (a message posted before actions) gives "".
func DecodeValue(v string) (taskID, digest, verdict string, ok bool) {
	head, verdict, ok := strings.Cut(v, "|")
	taskID, hex, hasDigest := strings.Cut(head, "@")
	if hasDigest {
		digest = arbiter.DigestPrefix + hex
	}
	return taskID, digest, verdict, ok && arbiter.ValidTaskID(taskID) && verdict != ""
}

// Question is the message asking the channel to decide t: its prompt, its
// context's top fields, its deadline and what happens at it, the
// verifier's answer (except on a blind audit or vote, arbiter.Task.Blind,
// which shows neither verdict nor confidence) and one button
// per verdict (a select menu past MaxButtons), with "Add a reason" and a
// link to the task on the desk, deskURL. Whatever is cut to fit Slack's
// limits ends in a link to the desk.
func Question(t *arbiter.Task, deskURL string) Message {
	blind := t.Blind()
	more := " … <" + deskURL + "|Open in the desk>"
	title := "*Decision needed*"
	switch {
	case t.AuditWaiting():
		title = "*Blind audit*: decide without the verifier's answer"
	case blind:
		title = "*Blind vote*: decide without the verifier's answer or the other votes"
	}
	blocks := []slackgo.Block{
		section(title + "\n" + fit(escape(t.Prompt), MaxSectionChars-utf8.RuneCountInString(title)-1, more)),
	}
	if fields := contextFields(t.Context, deskURL); len(fields) > 0 {
		blocks = append(blocks, slackgo.NewSectionBlock(nil, fields, nil))
	}
	blocks = append(blocks, actionSection(t, deskURL)...)
	digest := digestOf(t)
	var facts []string
	if e := t.Escalation; e != nil {
		facts = append(facts, "*Escalated to "+escape(e.Describe())+"* "+slackDate(e.EscalatedAt)+" after waiting "+escape(e.After))
	}
	if t.DeadlineAt != nil {
		if t.OnExpiry.IsExpire() {
			facts = append(facts, "Deadline "+slackDate(*t.DeadlineAt)+": the task expires unless decided")
		} else {
			facts = append(facts, "Deadline "+slackDate(*t.DeadlineAt)+": unless decided, "+escape(t.OnExpiry.Describe()))
		}
	}
	if !blind {
		if a := t.LastAgentAnswer(); a != nil {
			facts = append(facts, fmt.Sprintf("Verifier: *%s* at %s confidence (threshold %s)", escape(*a.Verdict),
				strconv.FormatFloat(*a.Confidence, 'f', 2, 64), strconv.FormatFloat(t.ConfidenceThreshold, 'f', 2, 64)))
		}
	}
	if len(facts) > 0 {
		els := make([]slackgo.MixedElement, len(facts))
		for i, f := range facts {
			els[i] = slackgo.NewTextBlockObject(slackgo.MarkdownType, f, false, false)
		}
		blocks = append(blocks, slackgo.NewContextBlock("facts", els...))
	}
	var elements []slackgo.BlockElement
	if len(t.AllowedVerdicts) <= MaxButtons {
		for i, v := range t.AllowedVerdicts {
			b := slackgo.NewButtonBlockElement(ActionDecide+"_"+strconv.Itoa(i), EncodeValue(t.ID, digest, v), plain(v))
			if i == 0 {
				b = b.WithStyle(slackgo.StylePrimary)
			}
			elements = append(elements, b)
		}
	} else {
		elements = append(elements, slackgo.NewOptionsSelectBlockElement(slackgo.OptTypeStatic, plain("Choose a verdict"),
			ActionDecide, verdictOptions(t)...))
	}
	if edit := editButton(t); edit != nil {
		elements = append(elements, edit)
	}
	elements = append(elements,
		slackgo.NewButtonBlockElement(ActionReason, EncodeValue(t.ID, digest, "reason"), plain("Add a reason")),
		&slackgo.ButtonBlockElement{Type: slackgo.METButton, ActionID: ActionDesk, Text: plain("Open in the desk"), URL: deskURL})
	blocks = append(blocks, slackgo.NewActionBlock("decide", elements...))
	return Message{Text: notification("Decision needed: " + t.Prompt), Blocks: blocks[:min(len(blocks), MaxBlocks)]}
}

// Outcome is the message a question becomes when its task ends: how it
// ended, by whom and when, without buttons.
func Outcome(t *arbiter.Task, deskURL string) Message {
	line := OutcomeLine(t)
	more := " … <" + deskURL + "|Open in the desk>"
	blocks := []slackgo.Block{
		section(line),
		slackgo.NewContextBlock("prompt", slackgo.NewTextBlockObject(slackgo.MarkdownType,
			fit(escape(t.Prompt), MaxSectionChars, more), false, false)),
	}
	return Message{Text: fit(line, maxTextChars, "…"), Blocks: blocks}
}

// notification is a message's text from what a caller wrote: cut to
// maxTextChars, then escaped, since Slack reads the text as mrkdwn too,
// where "<!channel>" would notify a whole channel and "<@U123>" a person.
// Cutting first keeps an escape whole.
func notification(s string) string {
	return escape(fit(s, maxTextChars, "…"))
}

// OutcomeLine says how a task ended: "✅ approve — alice@example.com,
// <time>", "⌛ expired", or that it still waits.
func OutcomeLine(t *arbiter.Task) string {
	o := arbiter.OutcomeOf(t)
	when := ""
	if o.At != 0 {
		when = ", " + slackDate(o.At)
	}
	switch o.State {
	case arbiter.OutcomeAudited:
		return "☑️ Audit answered — " + escape(o.By) + when
	case arbiter.OutcomeExpired:
		return "⌛ Expired" + when
	case arbiter.OutcomeCompleted:
		by := "the verifier"
		if o.By != "" {
			by = escape(o.By)
		}
		return "✅ " + escape(o.Verdict) + " — " + by + when
	}
	return "⏳ Waiting for a decision"
}

// Ended reports whether the task's question is answered: decided,
// expired, or its audit answered.
func Ended(t *arbiter.Task) bool {
	return !t.InReviewQueue()
}

// verdictOptions are the select menu's options, one per verdict.
func verdictOptions(t *arbiter.Task) []*slackgo.OptionBlockObject {
	opts := make([]*slackgo.OptionBlockObject, 0, len(t.AllowedVerdicts))
	for _, v := range t.AllowedVerdicts {
		opts = append(opts, slackgo.NewOptionBlockObject(EncodeValue(t.ID, digestOf(t), v), plain(v), nil))
	}
	return opts
}

// ReasonModal is the "Add a reason" modal: a verdict and a rationale. It
// carries back the digest of the action the message showed (digest) and
// where to answer the person (responseURL).
func ReasonModal(t *arbiter.Task, digest, responseURL string) slackgo.ModalViewRequest {
	opts := make([]*slackgo.OptionBlockObject, 0, len(t.AllowedVerdicts))
	for _, v := range t.AllowedVerdicts {
		opts = append(opts, slackgo.NewOptionBlockObject(v, plain(v), nil))
	}
	verdict := slackgo.NewInputBlock(blockVerdict, plain("Verdict"), nil,
		slackgo.NewOptionsSelectBlockElement(slackgo.OptTypeStatic, plain("Choose a verdict"), actionVerdict, opts...))
	input := slackgo.NewPlainTextInputBlockElement(plain("Why?"), actionRationale)
	input.Multiline = true
	input.MaxLength = min(arbiter.MaxRationaleChars, MaxSectionChars)
	rationale := slackgo.NewInputBlock(blockRationale, plain("Reason"), nil, input)
	return slackgo.ModalViewRequest{
		Type: slackgo.VTModal, CallbackID: CallbackReason, PrivateMetadata: modalMetadata(t.ID, digest, responseURL),
		Title: plain("Decide with a reason"), Submit: plain("Decide"), Close: plain("Cancel"),
		Blocks: slackgo.Blocks{BlockSet: []slackgo.Block{
			section(fit(escape(t.Prompt), MaxSectionChars, "…")), verdict, rationale}},
	}
}

// ReasonOf reads the modal's submitted verdict and rationale, with the
// task and the digest its message showed.
func ReasonOf(v slackgo.View) (taskID, digest, verdict, rationale string) {
	if v.State != nil {
		verdict = v.State.Values[blockVerdict][actionVerdict].SelectedOption.Value
		rationale = v.State.Values[blockRationale][actionRationale].Value
	}
	m := parseMetadata(v.PrivateMetadata)
	return m.TaskID, m.Digest, verdict, rationale
}

// contextFields returns the context object's first fields as a
// section's fields, each cut to maxFieldChars; past maxFields, the last
// says how many more there are and links to the desk.
func contextFields(raw json.RawMessage, deskURL string) []*slackgo.TextBlockObject {
	keys, values := arbiter.ContextFields(raw, maxFields+1)
	var out []*slackgo.TextBlockObject
	for i, k := range keys {
		if i == maxFields-1 && len(keys) > maxFields {
			out = append(out, slackgo.NewTextBlockObject(slackgo.MarkdownType, "… <"+deskURL+"|Open in the desk> for the rest", false, false))
			break
		}
		text := "*" + fit(escape(k), 100, "…") + "*\n" + fit(escape(values[i]), maxFieldChars, "…")
		out = append(out, slackgo.NewTextBlockObject(slackgo.MarkdownType, text, false, false))
	}
	return out
}

func section(text string) *slackgo.SectionBlock {
	return slackgo.NewSectionBlock(slackgo.NewTextBlockObject(slackgo.MarkdownType, text, false, false), nil, nil)
}

func plain(s string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.PlainTextType, fit(s, 75, "…"), false, false)
}

// slackDate is a time Slack shows in the reader's own time zone, with
// the UTC time for clients that cannot.
func slackDate(ts arbiter.Timestamp) string {
	t := ts.Time()
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.Format("2006-01-02 15:04 UTC"))
}

// escape makes text safe in mrkdwn: Slack reads &, < and > as markup.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// fit returns s when it has at most n characters, and otherwise its
// start followed by tail, n characters in all.
func fit(s string, n int, tail string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	keep := n - utf8.RuneCountInString(tail)
	if keep < 0 {
		keep = 0
	}
	r := []rune(s)
	return string(r[:keep]) + tail
}
