package teams

import (
	"strconv"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
)

// Adaptive Cards (schema 1.5) with Universal Actions: every button is an
// Action.Execute, which Teams sends to the bot as an adaptiveCard/action
// invoke, and the bot answers with the card the person sees next.
//
// A question is posted as its base card: the task and how it stands, what
// everyone in the conversation sees, with one button, "Decide", which
// answers each person with their own view. The people who may decide (the
// account's reviewers who linked their Teams user, at most MaxRefreshUsers)
// are named in the card's refresh.userIds, so Teams fetches their own view
// as soon as they see the card: the question with one button per verdict
// and an optional reason. When the task ends, the card is updated in place
// to its outcome, without buttons or refresh.

// Card limits: Teams takes a message of about 28 KB; a question stays well
// under it, and what is cut links to the desk.
const (
	// MaxRefreshUsers is Teams' limit on refresh.userIds.
	MaxRefreshUsers = arbiter.MaxTeamsDeciders
	// MaxButtons is how many verdicts get a button each; past it, the
	// verdicts are a choice and one button.
	MaxButtons     = 5
	maxPromptChars = 2000
	maxFields      = 10
	maxKeyChars    = 100
	maxValueChars  = 300
	// maxSummaryChars bounds a message's summary, the notification's text.
	maxSummaryChars = 200
	// MaxReasonChars bounds the reason field.
	MaxReasonChars = arbiter.MaxRationaleChars
)

// Verbs of the cards' actions, and the ids of their inputs.
const (
	VerbView    = "view"    // a person's own view of the card (refresh, "Decide")
	VerbDecide  = "decide"  // a verdict, with an optional reason
	InputReason = "reason"  // the reason field
	InputChoice = "verdict" // the verdicts' choice, past MaxButtons
)

// Card is an Adaptive Card.
type Card struct {
	Schema  string   `json:"$schema"`
	Type    string   `json:"type"`
	Version string   `json:"version"`
	Refresh *Refresh `json:"refresh,omitempty"`
	Body    []any    `json:"body"`
	Actions []any    `json:"actions,omitempty"`
	MSTeams *MSTeams `json:"msteams,omitempty"`
}

// Refresh asks Teams to fetch a person's own view of the card.
type Refresh struct {
	Action  Execute  `json:"action"`
	UserIDs []string `json:"userIds"`
}

// MSTeams is Teams' part of a card: its width.
type MSTeams struct {
	Width string `json:"width,omitempty"`
}

// Execute is an Action.Execute: a button Teams sends to the bot.
type Execute struct {
	Type  string            `json:"type"`
	Title string            `json:"title,omitempty"`
	Verb  string            `json:"verb"`
	Data  map[string]string `json:"data,omitempty"`
	Style string            `json:"style,omitempty"`
	// AssociatedInputs is "none" for an action that reads no field.
	AssociatedInputs string `json:"associatedInputs,omitempty"`
}

// OpenURL is an Action.OpenUrl.
type OpenURL struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	URL   string `json:"url"`
}

// TextBlock is Arbiter's own text (it may format a date).
type TextBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Wrap     bool   `json:"wrap"`
	Weight   string `json:"weight,omitempty"`
	Size     string `json:"size,omitempty"`
	IsSubtle bool   `json:"isSubtle,omitempty"`
	ID       string `json:"id,omitempty"`
}

// RichTextBlock holds text runs: what callers and people wrote goes in
// runs, which Adaptive Cards show as it is, never as Markdown.
type RichTextBlock struct {
	Type    string    `json:"type"`
	Inlines []TextRun `json:"inlines"`
	ID      string    `json:"id,omitempty"`
}

// TextRun is a run of text shown as it is.
type TextRun struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Weight   string `json:"weight,omitempty"`
	IsSubtle bool   `json:"isSubtle,omitempty"`
}

// InputText is a text field.
type InputText struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Label       string `json:"label"`
	Placeholder string `json:"placeholder,omitempty"`
	IsMultiline bool   `json:"isMultiline"`
	MaxLength   int    `json:"maxLength"`
}

// InputChoiceSet is a choice of values.
type InputChoiceSet struct {
	Type       string   `json:"type"`
	ID         string   `json:"id"`
	Label      string   `json:"label"`
	IsRequired bool     `json:"isRequired"`
	Choices    []Choice `json:"choices"`
}

// Choice is one value of a choice set.
type Choice struct {
	Title string `json:"title"`
	Value string `json:"value"`
}

// Personal is what a person's own view of a question adds to its base
// card.
type Personal struct {
	// Decide is true for a person who may decide it now: the card has a
	// button per verdict and a reason field.
	Decide bool
	// Note says, above the buttons, how the person stands ("Your vote,
	// “approve”, is recorded.", why they may not decide).
	Note string
	// LinkURL, when set, is a link for the person to link their Teams
	// user to their Arbiter sign-in (arbiter.ChatLinkService).
	LinkURL string
}

// Question is the card asking the conversation to decide t: its prompt,
// its context's first fields, its deadline and what happens at it, the
// verifier's answer (except on a blind audit or vote, arbiter.Task.Blind,
// which shows neither verdict nor confidence), and how it stands. deciders
// are the MRIs of the people whose own view Teams fetches (at most
// MaxRefreshUsers are kept). p, for a person's own view, adds their
// buttons or their note; the zero Personal is the base card, whose one
// button, "Decide", asks for a person's own view.
func Question(t *arbiter.Task, deskURL string, deciders []string, p Personal) Card {
	c := newCard()
	title := "Decision needed"
	switch {
	case t.AuditWaiting():
		title = "Blind audit: decide without the verifier's answer"
	case t.Blind():
		title = "Blind vote: decide without the verifier's answer or the other votes"
	}
	c.Body = append(c.Body, TextBlock{Type: "TextBlock", Text: title, Wrap: true, Weight: "Bolder", Size: "Medium"})
	prompt, cut := fit(t.Prompt, maxPromptChars)
	c.Body = append(c.Body, RichTextBlock{Type: "RichTextBlock", ID: "prompt", Inlines: []TextRun{run(prompt)}})
	keys, values := arbiter.ContextFields(t.Context, maxFields+1)
	for i, k := range keys {
		if i == maxFields {
			cut = true
			break
		}
		key, _ := fit(k, maxKeyChars)
		value, more := fit(values[i], maxValueChars)
		cut = cut || more
		c.Body = append(c.Body, RichTextBlock{Type: "RichTextBlock", Inlines: []TextRun{
			{Type: "TextRun", Text: key + ": ", Weight: "Bolder"}, run(value)}})
	}
	if cut {
		c.Body = append(c.Body, TextBlock{Type: "TextBlock", Text: "Cut to fit: open it in the desk for the rest.", Wrap: true, IsSubtle: true})
	}
	if e := t.Escalation; e != nil {
		c.Body = append(c.Body, RichTextBlock{Type: "RichTextBlock", Inlines: []TextRun{
			{Type: "TextRun", Text: "Escalated to ", Weight: "Bolder"}, run(e.Describe()),
			{Type: "TextRun", Text: " after waiting "}, run(e.After)}})
	}
	if t.DeadlineAt != nil {
		c.Body = append(c.Body, TextBlock{Type: "TextBlock", Wrap: true, IsSubtle: true, Text: "Deadline " + cardDate(*t.DeadlineAt)})
		what := "the task expires unless decided"
		if !t.OnExpiry.IsExpire() {
			what = "unless decided: " + t.OnExpiry.Describe()
		}
		c.Body = append(c.Body, RichTextBlock{Type: "RichTextBlock", Inlines: []TextRun{{Type: "TextRun", Text: "At the deadline, ", IsSubtle: true}, run(what)}})
	}
	if !t.Blind() {
		if a := t.LastAgentAnswer(); a != nil {
			c.Body = append(c.Body, RichTextBlock{Type: "RichTextBlock", ID: "verifier", Inlines: []TextRun{
				{Type: "TextRun", Text: "Verifier: "}, {Type: "TextRun", Text: *a.Verdict, Weight: "Bolder"},
				{Type: "TextRun", Text: " at " + strconv.FormatFloat(*a.Confidence, 'f', 2, 64) + " confidence (threshold " +
					strconv.FormatFloat(t.ConfidenceThreshold, 'f', 2, 64) + ")"}}})
		}
	}
	c.Body = append(c.Body, TextBlock{Type: "TextBlock", ID: "status", Text: "⏳ Waiting for a decision", Wrap: true, IsSubtle: true})
	if len(deciders) > 0 {
		c.Refresh = &Refresh{Action: Execute{Type: "Action.Execute", Title: "Refresh", Verb: VerbView, Data: taskData(t.ID)},
			UserIDs: deciders[:min(len(deciders), MaxRefreshUsers)]}
	}
	if p.Note != "" {
		c.Body = append(c.Body, RichTextBlock{Type: "RichTextBlock", ID: "note", Inlines: []TextRun{{Type: "TextRun", Text: p.Note, Weight: "Bolder"}}})
	}
	desk := OpenURL{Type: "Action.OpenUrl", Title: "Open in the desk", URL: deskURL}
	switch {
	case p.Decide:
		c.Body = append(c.Body, InputText{Type: "Input.Text", ID: InputReason, Label: "Reason (optional)", IsMultiline: true, MaxLength: MaxReasonChars})
		if len(t.AllowedVerdicts) <= MaxButtons {
			for i, v := range t.AllowedVerdicts {
				b := Execute{Type: "Action.Execute", Title: v, Verb: VerbDecide, Data: map[string]string{"taskId": t.ID, "verdict": v}}
				if i == 0 {
					b.Style = "positive"
				}
				c.Actions = append(c.Actions, b)
			}
		} else {
			choices := make([]Choice, 0, len(t.AllowedVerdicts))
			for _, v := range t.AllowedVerdicts {
				choices = append(choices, Choice{Title: v, Value: v})
			}
			c.Body = append(c.Body, InputChoiceSet{Type: "Input.ChoiceSet", ID: InputChoice, Label: "Verdict", IsRequired: true, Choices: choices})
			c.Actions = append(c.Actions, Execute{Type: "Action.Execute", Title: "Decide", Verb: VerbDecide, Data: taskData(t.ID), Style: "positive"})
		}
	case p.LinkURL != "":
		c.Actions = append(c.Actions, OpenURL{Type: "Action.OpenUrl", Title: "Link my Teams account", URL: p.LinkURL})
	case p.Note == "":
		c.Actions = append(c.Actions, Execute{Type: "Action.Execute", Title: "Decide", Verb: VerbView, Data: taskData(t.ID), AssociatedInputs: "none"})
	}
	c.Actions = append(c.Actions, desk)
	return c
}

// Outcome is the card a question becomes when its task ends: how it
// ended, by whom and when, and its prompt, without buttons or refresh.
func Outcome(t *arbiter.Task, deskURL string) Card {
	c := newCard()
	o := arbiter.OutcomeOf(t)
	var line []TextRun
	switch o.State {
	case arbiter.OutcomeAudited:
		line = []TextRun{{Type: "TextRun", Text: "☑️ Audit answered — ", Weight: "Bolder"}, run(o.By)}
	case arbiter.OutcomeExpired:
		line = []TextRun{{Type: "TextRun", Text: "⌛ Expired", Weight: "Bolder"}}
	case arbiter.OutcomeCompleted:
		by := o.By
		if by == "" {
			by = "the verifier"
		}
		line = []TextRun{{Type: "TextRun", Text: "✅ ", Weight: "Bolder"}, {Type: "TextRun", Text: o.Verdict, Weight: "Bolder"},
			{Type: "TextRun", Text: " — "}, run(by)}
	default:
		line = []TextRun{{Type: "TextRun", Text: "⏳ Waiting for a decision"}}
	}
	c.Body = append(c.Body, RichTextBlock{Type: "RichTextBlock", ID: "outcome", Inlines: line})
	if o.At != 0 {
		c.Body = append(c.Body, TextBlock{Type: "TextBlock", Text: cardDate(o.At), Wrap: true, IsSubtle: true})
	}
	prompt, _ := fit(t.Prompt, maxPromptChars)
	c.Body = append(c.Body, RichTextBlock{Type: "RichTextBlock", ID: "prompt", Inlines: []TextRun{{Type: "TextRun", Text: prompt, IsSubtle: true}}})
	c.Actions = []any{OpenURL{Type: "Action.OpenUrl", Title: "Open in the desk", URL: deskURL}}
	return c
}

// Notice is a card saying one thing to the person who clicked: that they
// may not decide here, that the task is not in this account.
func Notice(text string) Card {
	c := newCard()
	c.Body = append(c.Body, RichTextBlock{Type: "RichTextBlock", ID: "note", Inlines: []TextRun{run(text)}})
	return c
}

// Attach returns the card as an activity's attachment.
func (c Card) Attach() Attachment { return Attachment{ContentType: ContentTypeCard, Content: c} }

func newCard() Card {
	return Card{Schema: "http://adaptivecards.io/schemas/adaptive-card.json", Type: "AdaptiveCard", Version: "1.5",
		MSTeams: &MSTeams{Width: "Full"}}
}

func run(s string) TextRun { return TextRun{Type: "TextRun", Text: s} }

func taskData(taskID string) map[string]string { return map[string]string{"taskId": taskID} }

// cardDate is a time each reader's Teams shows in their own zone and
// language.
func cardDate(ts arbiter.Timestamp) string {
	s := ts.Time().UTC().Format("2006-01-02T15:04:05Z")
	return "{{DATE(" + s + ", SHORT)}} {{TIME(" + s + ")}}"
}

// fit returns s when it has at most n characters, and otherwise its
// start and "…", n characters in all, and whether it cut.
func fit(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	r := []rune(s)
	return string(r[:n-1]) + "…", true
}

// Current is the card everyone in a conversation sees of t now: its
// outcome once it ended (decided, expired, its audit answered), else its
// question's base card naming deciders for their own view.
func Current(t *arbiter.Task, deskURL string, deciders []string) Card {
	if !t.InReviewQueue() {
		return Outcome(t, deskURL)
	}
	return Question(t, deskURL, deciders, Personal{})
}

// Message is the activity that posts the card, or replaces a posted one
// with it. Its summary is what Teams' notifications and the chat list
// show of it: the prompt's start.
func Message(t *arbiter.Task, c Card) *Activity {
	summary, _ := fit(t.Prompt, maxSummaryChars)
	return &Activity{Type: TypeMessage, Summary: summary, Attachments: []Attachment{c.Attach()}}
}
