package dashboard

import (
	"strconv"

	"github.com/arbiterhq/arbiter"
)

// optCoefficient writes an agreement coefficient with two decimals, or an
// en dash when it is undefined.
func optCoefficient(x *float64) string {
	if x == nil {
		return "–"
	}
	return strconv.FormatFloat(*x, 'f', 2, 64)
}

// confidenceInput writes the certificate's confidence for the filter form.
func (v CalibrationView) confidenceInput() string { return percentText(v.Filter.Confidence) }

// stratumLabel names a stratum of the report: "task type refund", "model
// (none)".
func stratumLabel(dimension, value string) string {
	if value == "" {
		value = "(none)"
	}
	if dimension == arbiter.StratumTaskType {
		return "task type " + value
	}
	return dimension + " " + value
}
