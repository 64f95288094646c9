package arbiter

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readAgreementSet reads a set of testdata/agreement: one decided task a
// line, its votes as person:verdict separated by semicolons.
func readAgreementSet(t *testing.T, name string) []AgreementTask {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "agreement", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var tasks []AgreementTask
	for _, r := range rows[1:] {
		task := AgreementTask{TaskID: r[0], Consensus: r[2]}
		if r[1] != "" {
			agent := r[1]
			task.Agent = &agent
		}
		for _, v := range strings.Split(r[3], ";") {
			person, verdict, _ := strings.Cut(v, ":")
			task.Votes = append(task.Votes, Vote{PersonID: person, Email: person, Verdict: verdict})
		}
		tasks = append(tasks, task)
	}
	return tasks
}

// TestTeamAgreement_MatchesTheReference checks the report against
// agreement_expected.json, computed apart by agreement_reference.py; the
// paper's example gives Krippendorff's published α of 0.743.
func TestTeamAgreement_MatchesTheReference(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "agreement", "agreement_expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]AgreementReport
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != 3 {
		t.Fatalf("the reference has %d sets, want 3", len(want))
	}
	near := func(what string, got, want *float64) {
		t.Helper()
		switch {
		case (got == nil) != (want == nil):
			t.Errorf("%s = %v, want %v", what, got, want)
		case got != nil && math.Abs(*got-*want) > 1e-9:
			t.Errorf("%s = %v, want %v", what, *got, *want)
		}
	}
	for set, w := range want {
		t.Run(set, func(t *testing.T) {
			got := TeamAgreement(readAgreementSet(t, set))
			if got.Tasks != w.Tasks || got.Pairs != w.Pairs || got.FirstTwo.N != w.FirstTwo.N || len(got.Reviewers) != len(w.Reviewers) {
				t.Fatalf("counts = %d tasks, %d pairs, %d first two, %d reviewers; want %d, %d, %d, %d",
					got.Tasks, got.Pairs, got.FirstTwo.N, len(got.Reviewers), w.Tasks, w.Pairs, w.FirstTwo.N, len(w.Reviewers))
			}
			near("raw", got.Raw, w.Raw)
			near("alpha", got.Alpha, w.Alpha)
			near("first two raw", got.FirstTwo.Raw, w.FirstTwo.Raw)
			near("AC1", got.FirstTwo.AC1, w.FirstTwo.AC1)
			near("kappa", got.FirstTwo.Kappa, w.FirstTwo.Kappa)
			for i, r := range got.Reviewers {
				wr := w.Reviewers[i]
				if r.Email != wr.Email || r.Votes != wr.Votes || r.AgentVotes != wr.AgentVotes {
					t.Errorf("reviewer %d = %+v, want %+v", i, r, wr)
				}
				near(r.Email+" with consensus", r.WithConsensus, wr.WithConsensus)
				near(r.Email+" with agent", r.WithAgent, wr.WithAgent)
			}
		})
	}
	if a := TeamAgreement(readAgreementSet(t, "set_krippendorff.csv")).Alpha; a == nil || math.Abs(*a-0.743) > 0.0005 {
		t.Errorf("the paper's example α = %v, want 0.743", a)
	}
}

func TestTeamAgreement_UndefinedWithoutPairs(t *testing.T) {
	one := TeamAgreement([]AgreementTask{{Consensus: "approve", Votes: []Vote{{Email: "ann", Verdict: "approve"}}}})
	if one.Tasks != 0 || one.Raw != nil || one.Alpha != nil || one.FirstTwo.AC1 != nil || len(one.Reviewers) != 1 {
		t.Errorf("one vote = %+v; want no pairs and nil figures", one)
	}
	same := TeamAgreement([]AgreementTask{{Consensus: "approve", Votes: []Vote{{Email: "ann", Verdict: "approve"}, {Email: "bob", Verdict: "approve"}}}})
	if same.Alpha != nil || same.Raw == nil || *same.Raw != 1 {
		t.Errorf("one verdict everywhere = %+v; want raw 1, α undefined", same)
	}
}
