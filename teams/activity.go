// Package teams is Arbiter's side of Microsoft Teams through the Bot
// Framework: the verification of the activities Teams posts to the bot
// (the Bot Framework's JWT, checked with golang-jwt and keyfunc against
// the OpenID metadata's keys), the bot's client-credentials token, the
// Bot Connector calls (post and update an activity, read a member), the
// Adaptive Cards (schema 1.5, Universal Actions) a question and its
// outcome are, and the bot's answers to what people do with them. It
// depends on the root package only, as slack/ does.
package teams

import (
	"encoding/json"
	"strings"
)

// Activity is the part of a Bot Framework activity Arbiter reads and
// writes (https://learn.microsoft.com/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference#activity-object).
type Activity struct {
	Type         string          `json:"type"`
	Name         string          `json:"name,omitempty"`
	ID           string          `json:"id,omitempty"`
	ServiceURL   string          `json:"serviceUrl,omitempty"`
	ChannelID    string          `json:"channelId,omitempty"`
	From         *Account        `json:"from,omitempty"`
	Recipient    *Account        `json:"recipient,omitempty"`
	Conversation *Conversation   `json:"conversation,omitempty"`
	Text         string          `json:"text,omitempty"`
	Summary      string          `json:"summary,omitempty"`
	MembersAdded []Account       `json:"membersAdded,omitempty"`
	MembersGone  []Account       `json:"membersRemoved,omitempty"`
	ChannelData  *ChannelData    `json:"channelData,omitempty"`
	Value        json.RawMessage `json:"value,omitempty"`
	Attachments  []Attachment    `json:"attachments,omitempty"`
	ReplyToID    string          `json:"replyToId,omitempty"`
}

// Activity types and names Arbiter handles or sends.
const (
	TypeMessage            = "message"
	TypeInvoke             = "invoke"
	TypeConversationUpdate = "conversationUpdate"
	TypeInstallation       = "installationUpdate"
	TypeInvokeResponse     = "invokeResponse"
	InvokeCardAction       = "adaptiveCard/action"
)

// Account is a user or bot of a conversation. ID is the Teams user's
// MRI ("29:…"), which is the bot's own for each user; AADObjectID is
// their Microsoft Entra object id.
type Account struct {
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	AADObjectID string `json:"aadObjectId,omitempty"`
}

// Conversation is where an activity happened.
type Conversation struct {
	ID               string `json:"id"`
	Name             string `json:"name,omitempty"`
	ConversationType string `json:"conversationType,omitempty"`
	TenantID         string `json:"tenantId,omitempty"`
	IsGroup          bool   `json:"isGroup,omitempty"`
}

// ChannelData is Teams' part of an activity.
type ChannelData struct {
	EventType string  `json:"eventType,omitempty"`
	Team      *IDName `json:"team,omitempty"`
	Channel   *IDName `json:"channel,omitempty"`
	Tenant    *IDName `json:"tenant,omitempty"`
}

// IDName is a team, a channel or a tenant.
type IDName struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// Attachment carries a card.
type Attachment struct {
	ContentType string `json:"contentType"`
	Content     any    `json:"content"`
}

// ContentTypeCard is an Adaptive Card attachment's content type.
const ContentTypeCard = "application/vnd.microsoft.card.adaptive"

// Tenant returns the Microsoft Entra tenant the activity comes from:
// the conversation's, else Teams' channel data's.
func (a *Activity) Tenant() string {
	if a.Conversation != nil && a.Conversation.TenantID != "" {
		return a.Conversation.TenantID
	}
	if a.ChannelData != nil && a.ChannelData.Tenant != nil {
		return a.ChannelData.Tenant.ID
	}
	return ""
}

// Kind returns the conversation's kind (arbiter.TeamsChannel,
// TeamsPersonal or TeamsGroupChat).
func (a *Activity) Kind() string {
	if a.Conversation == nil {
		return ""
	}
	return a.Conversation.ConversationType
}

// AddsBot reports whether a conversationUpdate adds the bot itself.
func (a *Activity) AddsBot() bool {
	return a.Recipient != nil && containsAccount(a.MembersAdded, a.Recipient.ID)
}

// RemovesBot reports whether a conversationUpdate removes the bot.
func (a *Activity) RemovesBot() bool {
	return a.Recipient != nil && containsAccount(a.MembersGone, a.Recipient.ID)
}

func containsAccount(list []Account, id string) bool {
	for _, m := range list {
		if strings.EqualFold(m.ID, id) {
			return true
		}
	}
	return false
}
