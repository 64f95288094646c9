package db_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// The helpers below are shared by the package's tests; each test sits
// beside the file it tests.

var ctx = context.Background()

func newAccount(t *testing.T, d *db.DB, email string) *arbiter.Account {
	t.Helper()
	a, err := d.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatalf("create account: %v", err)
	}
	return a
}

func taskCreate(prompt string) arbiter.TaskCreate {
	return arbiter.TaskCreate{
		Prompt:              prompt,
		AllowedVerdicts:     []string{"approve", "reject"},
		ConfidenceThreshold: 0.9,
		TaskType:            "decide",
		Touchpoint:          "chat",
		Context:             json.RawMessage(`{"amount":12}`),
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := arbiter.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

// TestDemoService_AnswersAddedToAnOldDemo seeds a store whose demo tasks
// were seeded before they had verifier answers: they gain one each.
