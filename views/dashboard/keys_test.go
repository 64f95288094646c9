package dashboard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/views/layouts"
)

func TestKeys_SaysOnlyCreatesCountAgainstTheCap(t *testing.T) {
	var b strings.Builder
	if err := Keys(layouts.Page{Title: "API keys", Email: "a@example.com"}, KeysView{Now: time.Now()}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "Each request with a key counts") {
		t.Error("the keys page still says every request counts against the daily cap")
	}
	if !strings.Contains(page, "Each task created with a key counts against the account&#39;s daily cap; reading tasks does not.") {
		t.Errorf("the keys page does not say that only creates count against the cap:\n%s", page)
	}
}
