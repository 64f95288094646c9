package review

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/layouts"
)

// TestStats_AgreementShowsTheTeamAndOneself: a reviewer sees the team's
// agreement and their own line; an owner or admin sees every line.
func TestStats_AgreementShowsTheTeamAndOneself(t *testing.T) {
	report := arbiter.TeamAgreement([]arbiter.AgreementTask{
		{Consensus: "approve", Votes: []arbiter.Vote{{Email: "ann@example.com", Verdict: "approve"}, {Email: "bob@example.com", Verdict: "reject"}}},
		{Consensus: "approve", Votes: []arbiter.Vote{{Email: "ann@example.com", Verdict: "approve"}, {Email: "bob@example.com", Verdict: "approve"}}},
	})
	render := func(everyone bool) string {
		var b bytes.Buffer
		v := StatsView{Self: "ann@example.com", Everyone: everyone, Agreement: &report}
		if err := Stats(layouts.Page{Title: "Desk stats"}, v).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	html := render(false)
	if !strings.Contains(html, `data-testid="agreement-raw">50%`) || !strings.Contains(html, "ann@example.com (you)") || strings.Contains(html, "bob@example.com") {
		t.Errorf("a reviewer's page: team raw shown %v, own line %v, bob's line %v", strings.Contains(html, "50%"),
			strings.Contains(html, "ann@example.com (you)"), strings.Contains(html, "bob@example.com"))
	}
	if html := render(true); !strings.Contains(html, "bob@example.com") {
		t.Error("an admin's page leaves out bob's line")
	}
}
