package dashboard

import "strconv"

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
