package dashboard

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
)

// CalibrationView is the calibration report page: the account's, or the
// demo account's on the reviewer site.
type CalibrationView struct {
	Report arbiter.CalibrationReport
	Filter arbiter.CalibrationFilter
	// Action is where the filter form goes (the page itself).
	Action string
	// AuditRate is the account's audit rate; SettingsURL changes it (""
	// for the demo, which nobody can change).
	AuditRate   float64
	SettingsURL string
	// TaskURL is the prefix of a flagged task's page; "" shows no links.
	TaskURL string
	// Demo marks the demo account's report.
	Demo bool
	// Offer, when set, offers to apply the certified threshold to a
	// policy (to those who may manage policies).
	Offer *arbiter.ThresholdOffer
	// Backtests, when set, shows the backtest form and the latest runs
	// (to owners).
	Backtests *BacktestPanel
	Now       time.Time
}

// AuditSettingsView is the account's audit rate page.
type AuditSettingsView struct {
	AuditRate float64
	// Value is the audit rate as typed, shown again with Error.
	Value  string
	Error  string
	Notice string
}

// percentText writes a share as a percentage with up to one decimal.
func percentText(x float64) string { return arbiter.FormatShare(x) }

// optPercent writes an optional share, or an en dash.
func optPercent(x *float64) string {
	if x == nil {
		return "–"
	}
	return percentText(*x)
}

// optNumber writes an optional number with three decimals, or an en dash.
func optNumber(x *float64) string {
	if x == nil {
		return "–"
	}
	return strconv.FormatFloat(*x, 'f', 3, 64)
}

// threshold writes a threshold with two decimals.
func threshold(x float64) string { return arbiter.FormatThreshold(x) }

// ratePercentInput writes an audit rate for the settings form: "5" for 5%.
func ratePercentInput(rate float64) string {
	return strconv.FormatFloat(math.Round(rate*100000)/1000, 'f', -1, 64)
}

// periodOption is one choice of the report's time window.
type periodOption struct {
	Label, Value string
	Selected     bool
}

// periods are the time windows the filter form offers: created_after values
// counted back from now, and the window in use when it is none of them.
func (v CalibrationView) periods() []periodOption {
	opts := []periodOption{{Label: "All time", Value: ""}}
	for _, p := range []struct {
		label string
		d     time.Duration
	}{{"Last 24 hours", 24 * time.Hour}, {"Last 7 days", 7 * 24 * time.Hour}, {"Last 30 days", 30 * 24 * time.Hour}, {"Last 90 days", 90 * 24 * time.Hour}} {
		ts := arbiter.TimestampOf(v.Now.Add(-p.d))
		opts = append(opts, periodOption{Label: p.label, Value: strconv.FormatInt(int64(ts)/1000, 10)})
	}
	if a := v.Filter.CreatedAfter; a != nil {
		opts = append(opts, periodOption{Label: "Since " + a.Time().Format("2 Jan 2006 15:04 UTC"), Value: string(a.AppendJSON(nil)), Selected: true})
	} else {
		opts[0].Selected = true
	}
	return opts
}

// targetInput writes the target error rate for the form: "2%".
func (v CalibrationView) targetInput() string { return percentText(v.Filter.TargetErrorRate) }

// curvePoints are the risk–coverage points the table shows: a few round
// thresholds with data, and the recommended one.
func (v CalibrationView) curvePoints() []arbiter.RiskCoveragePoint {
	var out []arbiter.RiskCoveragePoint
	rec := v.Report.Recommendation.Threshold
	for k, p := range v.Report.RiskCoverage {
		round := k == 50 || k == 60 || k == 70 || k == 80 || k == 85 || k == 90 || k == 95 || k == 99
		if (round && p.N > 0) || (rec != nil && p.Threshold == *rec) {
			out = append(out, p)
		}
	}
	return out
}

// confusion is the confusion table laid out: the verdicts in rows (the
// agent's) and columns (the person's), the most frequent first, at most
// maxConfusionVerdicts of each, and the count of each cell.
type confusion struct {
	Agent, Human []string
	Cells        map[[2]string]int
}

const maxConfusionVerdicts = 12

func (v CalibrationView) confusion() confusion {
	agent, human := map[string]int{}, map[string]int{}
	c := confusion{Cells: map[[2]string]int{}}
	for _, cell := range v.Report.Confusion {
		agent[cell.AgentVerdict] += cell.N
		human[cell.HumanVerdict] += cell.N
		c.Cells[[2]string{cell.AgentVerdict, cell.HumanVerdict}] += cell.N
	}
	// Rows and columns follow one order, the verdicts' pairs in all (most
	// first, then by name), so a verdict's row and column line up and the
	// agreements run down the diagonal.
	total := map[string]int{}
	for k, n := range agent {
		total[k] += n
	}
	for k, n := range human {
		total[k] += n
	}
	order := func(m map[string]int) []string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			if total[a] != total[b] {
				return total[b] - total[a]
			}
			return strings.Compare(a, b)
		})
		if len(keys) > maxConfusionVerdicts {
			keys = keys[:maxConfusionVerdicts]
		}
		return keys
	}
	c.Agent, c.Human = order(agent), order(human)
	return c
}

func (c confusion) cell(agent, human string) string {
	return strconv.Itoa(c.Cells[[2]string{agent, human}])
}

// The charts' geometry; calibration_chart.templ draws them.

const (
	chartW, chartH           = 420, 320
	plotL, plotR             = 56, 404
	plotT, plotB             = 16, 264
	colorGrid, colorAxis     = "#e2e8f0", "#64748b"
	colorBar, colorPoint     = "#c7d2fe", "#4338ca"
	colorIdeal, colorTarget  = "#94a3b8", "#dc2626"
	colorUpper, colorEstim   = "#a5b4fc", "#4338ca"
	colorRecommended, fontSz = "#059669", "11"
)

func px(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }

// sx and sy map a value in [0, 1] (of ymax for sy) to the plot.
func sx(x float64) float64       { return plotL + x*(plotR-plotL) }
func sy(y, ymax float64) float64 { return plotB - min(y/ymax, 1)*(plotB-plotT) }
func clamp01(x float64) float64  { return min(max(x, 0), 1) }

// tickLabel writes a y tick: a number, or a percentage.
func tickLabel(y float64, percent bool) string {
	if percent {
		return percentText(y)
	}
	return strconv.FormatFloat(y, 'f', -1, 64)
}

// drawnBins are the reliability bins with pairs, which the diagram draws.
func drawnBins(c arbiter.Calibration) []arbiter.ReliabilityBin {
	var out []arbiter.ReliabilityBin
	for _, bin := range c.Bins {
		if bin.N > 0 && bin.Accuracy != nil {
			out = append(out, bin)
		}
	}
	return out
}

// riskScale is the top of the risk axis: the least of 5%, 10%, 20%, 50% and
// 100% that shows three times the target and every estimated error rate.
func riskScale(c arbiter.Calibration, target float64) float64 {
	need := 3 * target
	for _, p := range c.RiskCoverage {
		if p.ErrorRate != nil {
			need = max(need, *p.ErrorRate)
		}
	}
	for _, top := range []float64{0.05, 0.1, 0.2, 0.5} {
		if need <= top {
			return top
		}
	}
	return 1
}

// riskCurves are the points of the risk–coverage curve, from the highest
// threshold (least coverage) down: the estimated error and its upper
// bound, as a polyline's points; both "" without data.
func riskCurves(c arbiter.Calibration, ymax float64) (est, upper string) {
	var e, u []string
	for k := len(c.RiskCoverage) - 1; k >= 0; k-- {
		p := c.RiskCoverage[k]
		if p.ErrorRate == nil {
			continue
		}
		x := px(sx(clamp01(p.Coverage)))
		e = append(e, x+","+px(sy(*p.ErrorRate, ymax)))
		u = append(u, x+","+px(sy(*p.ErrorUpper, ymax)))
	}
	return strings.Join(e, " "), strings.Join(u, " ")
}
