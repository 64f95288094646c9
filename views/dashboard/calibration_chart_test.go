package dashboard

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestCalibrationCharts_DrawWhatTheStringsDrew: the charts, drawn as templ
// components, have the elements, attributes and texts, in order, that
// testdata/charts holds, which the SVG strings they replaced drew for the
// same reports; only the whitespace between elements may differ, which an
// SVG does not show.
func TestCalibrationCharts_DrawWhatTheStringsDrew(t *testing.T) {
	pairs := func(n int) []arbiter.LabelledPair {
		var out []arbiter.LabelledPair
		for i := range n {
			human := "a"
			if i%(7+n%13) == 0 {
				human = "b"
			}
			out = append(out, arbiter.LabelledPair{TaskID: fmt.Sprint(i), Confidence: 0.5 + float64(i%50)/100,
				AgentVerdict: "a", HumanVerdict: human, Weight: 1, Audit: i%3 == 0})
		}
		return out
	}
	for name, c := range map[string]arbiter.Calibration{
		"empty":      arbiter.Calibrate(nil, nil, 0.02, arbiter.DefaultCertificationConfidence),
		"n40-t0.3":   arbiter.Calibrate(arbiter.Bucketize(pairs(40)), arbiter.Evidence(pairs(40)), 0.3, arbiter.DefaultCertificationConfidence),
		"n3000-t0.1": arbiter.Calibrate(arbiter.Bucketize(pairs(3000)), arbiter.Evidence(pairs(3000)), 0.1, arbiter.DefaultCertificationConfidence),
	} {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile("testdata/charts/" + name + ".svg")
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			if err := reliabilityChart(c).Render(context.Background(), &got); err != nil {
				t.Fatal(err)
			}
			got.WriteString("\n")
			if err := riskCoverageChart(c, c.Recommendation.TargetErrorRate).Render(context.Background(), &got); err != nil {
				t.Fatal(err)
			}
			g, w := svgTokens(t, got.String()), svgTokens(t, string(want))
			if !slices.Equal(g, w) {
				for i := range min(len(g), len(w)) {
					if g[i] != w[i] {
						t.Fatalf("token %d is %s, want %s", i, g[i], w[i])
					}
				}
				t.Fatalf("%d tokens, want %d", len(g), len(w))
			}
		})
	}
}

// svgTokens lists the elements of the SVG documents in s, one a line, with
// their attributes in order, and their texts, leaving out whitespace
// between elements.
func svgTokens(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	for _, doc := range strings.Split(strings.TrimSpace(s), "\n") {
		dec := xml.NewDecoder(strings.NewReader(doc))
		dec.Strict = true
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("not well-formed XML: %v\n%s", err, doc)
			}
			switch el := tok.(type) {
			case xml.StartElement:
				line := "<" + el.Name.Local
				for _, a := range el.Attr {
					line += fmt.Sprintf(" %s=%q", a.Name.Local, a.Value)
				}
				out = append(out, line+">")
			case xml.EndElement:
				out = append(out, "</"+el.Name.Local+">")
			case xml.CharData:
				if text := strings.TrimSpace(string(el)); text != "" {
					out = append(out, text)
				}
			}
		}
	}
	return out
}
