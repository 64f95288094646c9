package dashboard

import (
	"slices"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestConfusion_RowsAndColumnsShareAnOrder: the agent said approve most
// and people said reject most, yet the table's rows (the agent's verdicts)
// and columns (the people's) come in the same order, so the agreements
// run down the diagonal.
func TestConfusion_RowsAndColumnsShareAnOrder(t *testing.T) {
	v := CalibrationView{Report: arbiter.CalibrationReport{Confusion: []arbiter.VerdictAgreement{
		{AgentVerdict: "approve", HumanVerdict: "approve", N: 3},
		{AgentVerdict: "approve", HumanVerdict: "reject", N: 7},
		{AgentVerdict: "reject", HumanVerdict: "reject", N: 1},
		{AgentVerdict: "escalate", HumanVerdict: "reject", N: 1},
	}}}
	c := v.confusion()
	if !slices.Equal(c.Agent, []string{"approve", "reject", "escalate"}) || !slices.Equal(c.Human, []string{"approve", "reject"}) {
		t.Errorf("rows %v, columns %v; want one order (approve, reject, escalate)", c.Agent, c.Human)
	}
}
