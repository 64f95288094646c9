package teams

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/url"
)

// ManifestVersion is the Teams app manifest schema the package writes.
const ManifestVersion = "1.19"

// Manifest returns the Teams app package an admin uploads for the bot
// appID (Teams admin center, or "Upload a custom app"): manifest.json with
// the bot in the team and personal scopes, and its two icons, zipped.
// appURL is Arbiter's dashboard, whose host the manifest names as a
// valid domain and whose address it gives as the developer's.
func Manifest(appID, appURL string) ([]byte, error) {
	host := appURL
	if u, err := url.Parse(appURL); err == nil && u.Host != "" {
		host = u.Hostname()
	}
	m := map[string]any{
		"$schema":         "https://developer.microsoft.com/json-schemas/teams/v" + ManifestVersion + "/MicrosoftTeams.schema.json",
		"manifestVersion": ManifestVersion,
		"version":         "1.0.0",
		"id":              appID,
		"developer": map[string]string{"name": "Arbiter", "websiteUrl": appURL, "privacyUrl": appURL,
			"termsOfUseUrl": appURL},
		"name": map[string]string{"short": "Arbiter", "full": "Arbiter approvals"},
		"description": map[string]string{
			"short": "Decide Arbiter's tasks without leaving Teams",
			"full": "Arbiter posts the tasks that need a person as cards, to the channels and chats you add it to: " +
				"the question, its context and deadline, one button per verdict. A click decides as you; every card " +
				"shows the outcome when the task ends.",
		},
		"icons":       map[string]string{"color": "color.png", "outline": "outline.png"},
		"accentColor": "#4F46E5",
		"bots": []map[string]any{{"botId": appID, "scopes": []string{"team", "personal"},
			"supportsFiles": false, "isNotificationOnly": false}},
		"permissions":  []string{"identity", "messageTeamMembers"},
		"validDomains": []string{host},
	}
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data func() ([]byte, error)
	}{
		{"manifest.json", func() ([]byte, error) { return manifest, nil }},
		{"color.png", func() ([]byte, error) { return icon(192, color.NRGBA{0x4f, 0x46, 0xe5, 0xff}) }},
		{"outline.png", func() ([]byte, error) { return icon(32, color.NRGBA{}) }},
	} {
		data, err := f.data()
		if err != nil {
			return nil, err
		}
		w, err := zw.Create(f.name)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// icon draws a white check mark on a square of background, size pixels a
// side: the color icon on the accent color, the outline icon on
// transparency, as Teams asks.
func icon(size int, background color.NRGBA) ([]byte, error) {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	for y := range size {
		for x := range size {
			img.SetNRGBA(x, y, background)
		}
	}
	white := color.NRGBA{0xff, 0xff, 0xff, 0xff}
	thick := max(1, size/16)
	// Two strokes of the check: down-right, then up-right.
	line := func(x0, y0, x1, y1 float64) {
		steps := size * 2
		for i := 0; i <= steps; i++ {
			t := float64(i) / float64(steps)
			cx, cy := int((x0+(x1-x0)*t)*float64(size)), int((y0+(y1-y0)*t)*float64(size))
			for dy := -thick; dy <= thick; dy++ {
				for dx := -thick; dx <= thick; dx++ {
					if x, y := cx+dx, cy+dy; x >= 0 && y >= 0 && x < size && y < size {
						img.SetNRGBA(x, y, white)
					}
				}
			}
		}
	}
	line(0.22, 0.52, 0.42, 0.72)
	line(0.42, 0.72, 0.78, 0.30)
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
