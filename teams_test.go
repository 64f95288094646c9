package arbiter_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestTeamsConnectionInput_Validate(t *testing.T) {
	const app, tenant = "1F0E2C7A-5B1D-4E8F-9A3C-7D6B5E4F3A21", "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	for _, tc := range []struct {
		name  string
		in    arbiter.TeamsConnectionInput
		field string // "" when valid
	}{
		{"Valid", arbiter.TeamsConnectionInput{AppID: " " + app + " ", TenantID: tenant, ClientSecret: "abc~DEF.123_xyz"}, ""},
		{"AppNotAGUID", arbiter.TeamsConnectionInput{AppID: "my-bot", TenantID: tenant, ClientSecret: "abc~DEF.123_xyz"}, "app_id"},
		{"TenantNotAGUID", arbiter.TeamsConnectionInput{AppID: app, TenantID: "contoso.onmicrosoft.com", ClientSecret: "abc~DEF.123_xyz"}, "tenant_id"},
		{"SecretShort", arbiter.TeamsConnectionInput{AppID: app, TenantID: tenant, ClientSecret: "short"}, "client_secret"},
		{"SecretWithSpace", arbiter.TeamsConnectionInput{AppID: app, TenantID: tenant, ClientSecret: "abc DEF 123 xyz"}, "client_secret"},
		{"SecretTooLong", arbiter.TeamsConnectionInput{AppID: app, TenantID: tenant, ClientSecret: strings.Repeat("x", 257)}, "client_secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			err := in.Validate()
			if tc.field == "" {
				if err != nil || in.AppID != strings.ToLower(app) {
					t.Fatalf("Validate = %v, app %q", err, in.AppID)
				}
				return
			}
			var e *arbiter.Error
			if !errors.As(err, &e) || e.Code != arbiter.EINVALID || e.Field != tc.field {
				t.Fatalf("Validate = %v, want EINVALID on %s", err, tc.field)
			}
			if strings.Contains(err.Error(), in.ClientSecret) && in.ClientSecret != "" {
				t.Errorf("the error echoes the secret: %v", err)
			}
		})
	}
}

func TestTeamsConversationName(t *testing.T) {
	for _, tc := range []struct {
		kind, team, channel, person, want string
	}{
		{arbiter.TeamsChannel, "Finance", "Approvals", "", "finance/approvals"},
		{arbiter.TeamsChannel, "Finance & Ops (EU)", "Refunds — urgent!", "", "finance-ops-eu/refunds-urgent"},
		{arbiter.TeamsChannel, "Équipe", "Général", "", "quipe/g-n-ral"},
		{arbiter.TeamsPersonal, "", "", "Ann.Lee@Example.com", "@ann.lee@example.com"},
		{arbiter.TeamsGroupChat, "", "Release crew", "", "chat/release-crew"},
		{arbiter.TeamsChannel, "", "", "", "x/x"},
		{arbiter.TeamsChannel, strings.Repeat("a", 90), strings.Repeat("b", 90), "", strings.Repeat("a", 90) + "/" + strings.Repeat("b", 9)},
	} {
		got := arbiter.TeamsConversationName(tc.kind, tc.team, tc.channel, tc.person)
		if got != tc.want {
			t.Errorf("TeamsConversationName(%q, %q, %q, %q) = %q, want %q", tc.kind, tc.team, tc.channel, tc.person, got, tc.want)
		}
		if !arbiter.ValidTeamsTarget(got) {
			t.Errorf("%q is not a valid target", got)
		}
	}
}

func TestTeamsTargets(t *testing.T) {
	got := arbiter.TeamsTargets([]string{"slack:#a", "teams:finance/approvals", "teams:@ann@example.com"})
	if strings.Join(got, " ") != "finance/approvals @ann@example.com" {
		t.Errorf("TeamsTargets = %v", got)
	}
	if got := arbiter.SlackChannels([]string{"slack:#a", "teams:finance/approvals"}); strings.Join(got, " ") != "#a" {
		t.Errorf("SlackChannels = %v", got)
	}
}
