package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/taskview/maximal"
	"github.com/arbiterhq/arbiter/views/layouts"
	"github.com/arbiterhq/arbiter/views/review"
)

// The views phase (issue 35): the reviewer's task page rendered, in this
// process, for each context of the largest size the API accepts in the
// shapes that cost the page the most (internal/taskview/maximal), against
// the page's bounds: the page under maximal.MaxPageBytes and a render
// allocating under maximal.MaxAllocBytes.

// viewRender is one shape's render.
type viewRender struct {
	name                   string
	nsPerOp, bytesPerOp    int64
	allocsPerOp, pageBytes int64
	failed                 error
}

// measureViews renders the task page of every maximal context with
// testing.Benchmark.
func (b *bench) measureViews(ctx context.Context) error {
	names := slices.Sorted(maps.Keys(maximal.Contexts))
	b.logf("rendering the task page for %d maximal contexts", len(names))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded, Prompt: "Decide.",
			AllowedVerdicts: []string{"approve", "reject"}, Context: json.RawMessage(maximal.Contexts[name])}
		var buf bytes.Buffer
		var failed error
		r := testing.Benchmark(func(tb *testing.B) {
			tb.ReportAllocs()
			for tb.Loop() {
				buf.Reset()
				page := review.TaskPage(layouts.Page{Title: "Review"},
					review.TaskView{Task: task, Action: "/review/tasks/" + task.ID, Now: time.Now()})
				if err := page.Render(ctx, &buf); err != nil {
					failed = err
					return
				}
			}
		})
		b.views = append(b.views, viewRender{name: name, nsPerOp: r.NsPerOp(), bytesPerOp: r.AllocedBytesPerOp(),
			allocsPerOp: r.AllocsPerOp(), pageBytes: int64(buf.Len()), failed: failed})
	}
	return nil
}

// printViews writes the views phase's table and its verdict against the
// bounds.
func printViews(w io.Writer, views []viewRender) {
	if len(views) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "task page, largest context\tms/op\tKiB/op\tallocs/op\tpage KiB\t\n")
	var worst viewRender
	ok := true
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%.2f\t%d\t%d\t%d\t\n", v.name, float64(v.nsPerOp)/1e6, v.bytesPerOp>>10, v.allocsPerOp, v.pageBytes>>10)
		worst.nsPerOp = max(worst.nsPerOp, v.nsPerOp)
		worst.bytesPerOp = max(worst.bytesPerOp, v.bytesPerOp)
		worst.allocsPerOp = max(worst.allocsPerOp, v.allocsPerOp)
		worst.pageBytes = max(worst.pageBytes, v.pageBytes)
		if v.failed != nil {
			fmt.Fprintf(tw, "%s: %v\t\t\t\t\t\n", v.name, v.failed)
		}
		ok = ok && v.failed == nil && v.pageBytes > 0 && v.pageBytes < maximal.MaxPageBytes && v.bytesPerOp < maximal.MaxAllocBytes
	}
	tw.Flush()
	fmt.Fprintf(w, "%-22s %d shapes: slowest %.1f ms, most %d KiB and %d allocs a render, largest page %d KiB (target: page < %d KiB, render < %d KiB) %s\n",
		"views: largest context", len(views), float64(worst.nsPerOp)/1e6, worst.bytesPerOp>>10, worst.allocsPerOp, worst.pageBytes>>10,
		maximal.MaxPageBytes>>10, maximal.MaxAllocBytes>>10, verdict(ok))
}
