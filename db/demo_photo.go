package db

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
)

// demoParcelPhoto is the demo's photo of a crushed parcel, as a data URL:
// drawn here, so the demo needs no image file and loads nothing from
// elsewhere. The encoder is deterministic, so the seeded context is the
// same on every start.
var demoParcelPhoto = func() string {
	const w, h = 160, 100
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	floor, box, tape, dent := color.NRGBA{226, 232, 240, 255}, color.NRGBA{180, 132, 84, 255},
		color.NRGBA{214, 190, 140, 255}, color.NRGBA{120, 84, 50, 255}
	for y := range h {
		for x := range w {
			c := floor
			if x > 20 && x < 140 && y > 15 && y < 90 {
				c = box
				if x > 74 && x < 86 {
					c = tape
				}
				// The crushed corner: a dark wedge, top right.
				if x-100 > y-15 && x > 100 {
					c = dent
				}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}()
