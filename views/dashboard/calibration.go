package dashboard

import (
	"fmt"
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
	Now  time.Time
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
func threshold(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

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

// The charts: SVG drawn on the server, so the report needs no script and
// the page's Content-Security-Policy (no inline style or script) holds.
// They use presentation attributes only, and every text in them is a
// number or a fixed label.

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
func line(b *strings.Builder, x1, y1, x2, y2 float64, stroke, width, dash string) {
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"`, px(x1), px(y1), px(x2), px(y2), stroke, width)
	if dash != "" {
		fmt.Fprintf(b, ` stroke-dasharray="%s"`, dash)
	}
	b.WriteString("/>")
}

// text writes a label, a number or a fixed word: nothing a user typed.
func text(b *strings.Builder, x, y float64, anchor, s, color string) {
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="%s" font-size="%s" fill="%s">%s</text>`, px(x), px(y), anchor, fontSz, color, s)
}

// axes draws the grid, the ticks and the axis titles; y ticks run to ymax.
func axes(b *strings.Builder, xTitle, yTitle string, ymax float64, yPercent bool) {
	for i := 0; i <= 5; i++ {
		f := float64(i) / 5
		line(b, sx(f), plotT, sx(f), plotB, colorGrid, "1", "")
		line(b, plotL, sy(f*ymax, ymax), plotR, sy(f*ymax, ymax), colorGrid, "1", "")
		text(b, sx(f), plotB+16, "middle", strconv.FormatFloat(f, 'f', -1, 64), colorAxis)
		label := strconv.FormatFloat(f*ymax, 'f', -1, 64)
		if yPercent {
			label = percentText(f * ymax)
		}
		text(b, plotL-6, sy(f*ymax, ymax)+4, "end", label, colorAxis)
	}
	line(b, plotL, plotB, plotR, plotB, colorAxis, "1", "")
	line(b, plotL, plotT, plotL, plotB, colorAxis, "1", "")
	text(b, (plotL+plotR)/2, chartH-8, "middle", xTitle, colorAxis)
	fmt.Fprintf(b, `<text x="14" y="%s" text-anchor="middle" font-size="%s" fill="%s" transform="rotate(-90 14 %s)">%s</text>`,
		px((plotT+plotB)/2), fontSz, colorAxis, px((plotT+plotB)/2), yTitle)
}

// svgOpen starts a chart with its accessible title and description.
func svgOpen(b *strings.Builder, id, title, desc string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" role="img" aria-labelledby="%s-title %s-desc" class="h-auto w-full max-w-xl" data-testid="%s">`,
		chartW, chartH, id, id, id)
	fmt.Fprintf(b, `<title id="%s-title">%s</title><desc id="%s-desc">%s</desc>`, id, title, id, desc)
}

// ReliabilitySVG draws the reliability diagram: for each bin with pairs, a
// bar up to its observed accuracy, its mean confidence and accuracy as a
// point, and the Wilson 95% interval as a whisker, against the diagonal of
// perfect calibration.
func ReliabilitySVG(c arbiter.Calibration) string {
	var b strings.Builder
	svgOpen(&b, "reliability", "Reliability diagram",
		"Observed accuracy against the agent's confidence, in ten bins, with 95% intervals. Points on the dashed diagonal are perfectly calibrated; points below it are overconfident.")
	axes(&b, "Agent's confidence", "Observed accuracy", 1, false)
	for _, bin := range c.Bins {
		if bin.N == 0 || bin.Accuracy == nil {
			continue
		}
		x0, x1 := sx(bin.Lower)+2, sx(bin.Upper)-2
		y := sy(*bin.Accuracy, 1)
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s–%s: accuracy %s of %d</title></rect>`,
			px(x0), px(y), px(x1-x0), px(plotB-y), colorBar, threshold(bin.Lower), threshold(bin.Upper), percentText(*bin.Accuracy), bin.N)
	}
	// The diagonal over the bars, the points and intervals over both.
	line(&b, sx(0), sy(0, 1), sx(1), sy(1, 1), colorIdeal, "1.5", "4 4")
	for _, bin := range c.Bins {
		if bin.N == 0 || bin.Accuracy == nil {
			continue
		}
		y := sy(*bin.Accuracy, 1)
		cx := sx(clamp01(*bin.MeanConfidence))
		line(&b, cx, sy(*bin.WilsonLower, 1), cx, sy(*bin.WilsonUpper, 1), colorPoint, "1.5", "")
		line(&b, cx-4, sy(*bin.WilsonLower, 1), cx+4, sy(*bin.WilsonLower, 1), colorPoint, "1.5", "")
		line(&b, cx-4, sy(*bin.WilsonUpper, 1), cx+4, sy(*bin.WilsonUpper, 1), colorPoint, "1.5", "")
		fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3.5" fill="%s"/>`, px(cx), px(y), colorPoint)
	}
	b.WriteString("</svg>")
	return b.String()
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

// RiskCoverageSVG draws the risk–coverage curve: for each threshold with
// data, the share of tasks the agent would decide (x) against the estimated
// error among them (solid) and its upper 95% bound (dashed, clipped at the
// top of the axis), with the target as a red line and the recommended
// threshold as a green point.
func RiskCoverageSVG(c arbiter.Calibration, target float64) string {
	var b strings.Builder
	ymax := riskScale(c, target)
	svgOpen(&b, "risk-coverage", "Risk–coverage curve",
		"For each threshold, the share of tasks the agent would decide alone against the estimated error rate among them (solid) and its upper 95% bound (dashed); the red line is the target error rate.")
	axes(&b, "Share the agent decides (coverage)", "Error rate", ymax, true)
	line(&b, plotL, sy(target, ymax), plotR, sy(target, ymax), colorTarget, "1.5", "6 3")
	text(&b, plotR, sy(target, ymax)-4, "end", "target "+percentText(target), colorTarget)
	var est, upper []string
	for k := len(c.RiskCoverage) - 1; k >= 0; k-- {
		p := c.RiskCoverage[k]
		if p.ErrorRate == nil {
			continue
		}
		x := px(sx(clamp01(p.Coverage)))
		est = append(est, x+","+px(sy(*p.ErrorRate, ymax)))
		upper = append(upper, x+","+px(sy(*p.ErrorUpper, ymax)))
	}
	if len(upper) > 0 {
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="4 3"/>`, strings.Join(upper, " "), colorUpper)
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`, strings.Join(est, " "), colorEstim)
	}
	if r := c.Recommendation; r.Threshold != nil {
		x, y := sx(clamp01(*r.AutomationRate)), sy(*r.ErrorUpper, ymax)
		fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="5" fill="%s"><title>threshold %s</title></circle>`, px(x), px(y), colorRecommended, threshold(*r.Threshold))
		text(&b, min(x+8, plotR-40), y-8, "start", "≥ "+threshold(*r.Threshold), colorRecommended)
	}
	b.WriteString("</svg>")
	return b.String()
}
