package arbiter_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

const claimDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseExecutionClaim(t *testing.T) {
	c, err := arbiter.ParseExecutionClaim([]byte(`{"digest":"` + claimDigest + `","claim_id":"gw-1","executor":"arbiter gateway","verdicts":["approve"]}`))
	if err != nil || c.Digest != claimDigest || c.ClaimID != "gw-1" || c.Executor != "arbiter gateway" || len(c.Verdicts) != 1 {
		t.Fatalf("ParseExecutionClaim = %+v, %v", c, err)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"claim_id":"c"}`, "digest"},
		{`{"digest":"sha256:ABC","claim_id":"c"}`, "digest"},
		{`{"digest":"` + strings.ToUpper(claimDigest) + `","claim_id":"c"}`, "digest"},
		{`{"digest":"` + claimDigest + `"}`, "claim_id"},
		{`{"digest":"` + claimDigest + `","claim_id":""}`, "claim_id"},
		{`{"digest":"` + claimDigest + `","claim_id":"a\u00e9"}`, "claim_id"},
		{`{"digest":"` + claimDigest + `","claim_id":"` + strings.Repeat("c", arbiter.MaxClaimIDLen+1) + `"}`, "claim_id"},
		{`{"digest":"` + claimDigest + `","claim_id":"c","executor":"a\nb"}`, "executor"},
		{`{"digest":"` + claimDigest + `","claim_id":"c","executor":null}`, "executor"},
		{`{"digest":"` + claimDigest + `","claim_id":"c","verdicts":[""]}`, "verdicts"},
		{`{"digest":"` + claimDigest + `","claim_id":"c","verdicts":"approve"}`, "verdicts"},
		{`{"digest":"` + claimDigest + `","claim_id":"c","other":1}`, ""},
	} {
		_, err := arbiter.ParseExecutionClaim([]byte(tc.body))
		var e *arbiter.Error
		if !errors.As(err, &e) || e.Code != arbiter.EINVALID || e.Field != tc.field || e.Message == "" {
			t.Errorf("%s: %v, want EINVALID on %s", tc.body, err, tc.field)
		}
	}
}

func TestTask_CheckExecution(t *testing.T) {
	approve, reject := "approve", "reject"
	action := &arbiter.TaskAction{Name: "transfer", Digest: claimDigest}
	decided := func(verdict *string, approved string) *arbiter.Task {
		return &arbiter.Task{ID: "tsk_1", Status: arbiter.StatusCompleted, FinalVerdict: verdict, Action: action,
			ApprovedAction: &arbiter.ApprovedAction{Name: "transfer", Digest: approved}}
	}
	claim := arbiter.ExecutionClaim{Digest: claimDigest, ClaimID: "c", Verdicts: []string{"approve"}}
	if err := decided(&approve, claimDigest).CheckExecution(claim); err != nil {
		t.Errorf("an approved action: %v", err)
	}
	for name, tc := range map[string]struct {
		task  *arbiter.Task
		claim arbiter.ExecutionClaim
	}{
		"no action":       {&arbiter.Task{ID: "tsk_1", Status: arbiter.StatusCompleted, FinalVerdict: &approve}, claim},
		"not decided":     {&arbiter.Task{ID: "tsk_1", Status: arbiter.StatusHumanNeeded, Action: action}, claim},
		"another verdict": {decided(&reject, claimDigest), claim},
		"another digest":  {decided(&approve, "sha256:"+strings.Repeat("f", 64)), claim},
	} {
		var e *arbiter.Error
		if err := tc.task.CheckExecution(tc.claim); !errors.As(err, &e) || e.Code != arbiter.ECONFLICT || e.Reason == arbiter.ReasonAlreadyExecuted {
			t.Errorf("%s: %v, want a plain ECONFLICT", name, err)
		}
	}
	// Without verdicts, any final verdict runs the approved action.
	if err := decided(&reject, claimDigest).CheckExecution(arbiter.ExecutionClaim{Digest: claimDigest, ClaimID: "c"}); err != nil {
		t.Errorf("no verdicts named: %v", err)
	}
}
