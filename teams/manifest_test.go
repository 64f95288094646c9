package teams_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"image/png"
	"io"
	"testing"

	"github.com/arbiterhq/arbiter/teams"
)

// TestManifest: the app package holds a manifest naming the bot in the
// team and personal scopes and the dashboard's host, and the two icons
// at Teams' sizes (192 and 32 pixels).
func TestManifest(t *testing.T) {
	data, err := teams.Manifest(testApp, "https://arbiter.example.com")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name], _ = io.ReadAll(rc)
		rc.Close()
	}
	var m struct {
		ID   string `json:"id"`
		Bots []struct {
			BotID  string   `json:"botId"`
			Scopes []string `json:"scopes"`
		} `json:"bots"`
		ValidDomains []string `json:"validDomains"`
	}
	if err := json.Unmarshal(files["manifest.json"], &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if m.ID != testApp || len(m.Bots) != 1 || m.Bots[0].BotID != testApp || len(m.Bots[0].Scopes) != 2 ||
		m.Bots[0].Scopes[0] != "team" || m.Bots[0].Scopes[1] != "personal" || m.ValidDomains[0] != "arbiter.example.com" {
		t.Errorf("manifest %+v", m)
	}
	for name, size := range map[string]int{"color.png": 192, "outline.png": 32} {
		img, err := png.Decode(bytes.NewReader(files[name]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() != size || b.Dy() != size {
			t.Errorf("%s is %v, want %d×%d", name, b, size, size)
		}
	}
}
