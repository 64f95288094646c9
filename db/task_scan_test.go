package db_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/arbiterhq/arbiter/db"
)

// The stored allowed_verdicts are read as json.Unmarshal reads them: the
// same strings, an empty list for [], nil for null, and an error where it
// fails, whether the text takes the quick path or not.
func TestDecodeVerdicts_ReadsAsJSONUnmarshal(t *testing.T) {
	for _, text := range []string{
		`["approve","reject","escalate"]`, `["a"]`, `[""]`, `["",""]`, `[]`, `null`,
		`["a\"b"]`, `["a\\"]`, `["\u003cb\u003e"]`, `["é","日本"]`, `[ "a" , "b" ]`, `["a",]`, `["a""b"]`,
		`["a"`, `[`, `"a"`, `["a",1]`, `["tab	here"]`, `["a","b"]x`, `["a"]]`, `[,"a"]`, `["]`, `""`, ``,
		`["approve","reject","escalate","refund-partial","needs more info"]`, "[\"\x7f\"]",
	} {
		var want []string
		wantErr := json.Unmarshal([]byte(text), &want)
		got, err := db.DecodeVerdicts(text)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, json.Unmarshal's %v", text, err, wantErr)
			continue
		}
		if wantErr == nil && (!reflect.DeepEqual(got, want) || (got == nil) != (want == nil)) {
			t.Errorf("%s: %#v, json.Unmarshal %#v", text, got, want)
		}
	}
}
