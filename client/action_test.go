package client_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/arbiterhq/arbiter/client"
)

// TestActionDigest_Vectors: the client computes the digests of
// testdata/jcs/digests.json, as the server and both SDKs do.
func TestActionDigest_Vectors(t *testing.T) {
	b, err := os.ReadFile("../testdata/jcs/digests.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []struct {
		Name     string `json:"name"`
		ArgsText string `json:"args_text"`
		Digest   string `json:"digest"`
	}
	if err := json.Unmarshal(b, &vs); err != nil || len(vs) == 0 {
		t.Fatal(err)
	}
	for _, v := range vs {
		if got, err := client.ActionDigest(v.Name, json.RawMessage(v.ArgsText)); err != nil || got != v.Digest {
			t.Errorf("%s: %s, %v; want %s", v.Name, got, err, v.Digest)
		}
	}
}

func TestTask_ApprovedAction(t *testing.T) {
	approve := "approve"
	digest, _ := client.ActionDigest("issue_refund", json.RawMessage(`{"amount":80}`))
	task := func(args string) *client.Task {
		return &client.Task{Status: client.StatusCompleted, FinalVerdict: &approve,
			Approved: &client.ApprovedAction{Name: "issue_refund", Args: json.RawMessage(args), Digest: digest}}
	}
	if a, err := task(`{"amount": 80}`).ApprovedAction("approve"); err != nil || a.Name != "issue_refund" {
		t.Errorf("ApprovedAction = %+v, %v", a, err)
	}
	if _, err := task(`{"amount": 800}`).ApprovedAction(); !errors.Is(err, client.ErrActionDigest) {
		t.Errorf("tampered args: %v, want ErrActionDigest", err)
	}
	if _, err := task(`{"amount": 80}`).ApprovedAction("reject"); !errors.Is(err, client.ErrNotApproved) {
		t.Errorf("another verdict: %v, want ErrNotApproved", err)
	}
	if _, err := (&client.Task{Status: client.StatusHumanNeeded}).ApprovedAction(); !errors.Is(err, client.ErrNotApproved) {
		t.Errorf("a pending task: %v, want ErrNotApproved", err)
	}
}
