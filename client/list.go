package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ListOptions select the tasks ListTasks returns, newest first. Zero fields
// match every task; set fields combine.
type ListOptions struct {
	// Status keeps tasks in this status (StatusPending, …).
	Status string
	// TaskType, Source and Touchpoint keep tasks with exactly this label.
	TaskType, Source, Touchpoint string
	// FinalTier keeps completed tasks decided by TierAgent or TierHuman.
	FinalTier string
	// CreatedAfter and CreatedBefore keep tasks created strictly between
	// them, to the millisecond.
	CreatedAfter, CreatedBefore time.Time
	// Limit is the page size, 1 to 100 (zero: the server's default, 20).
	Limit int
	// StartingAfter is the id of a task of the account: the page continues
	// after it. TaskPages and AllTasks set it for you.
	StartingAfter string
}

// query encodes the options as the list's query string.
func (o ListOptions) query() string {
	q := url.Values{}
	for _, p := range []struct{ name, value string }{
		{"status", o.Status}, {"task_type", o.TaskType}, {"source", o.Source}, {"touchpoint", o.Touchpoint},
		{"final_tier", o.FinalTier}, {"starting_after", o.StartingAfter},
	} {
		if p.value != "" {
			q.Set(p.name, p.value)
		}
	}
	if !o.CreatedAfter.IsZero() {
		q.Set("created_after", epochString(o.CreatedAfter))
	}
	if !o.CreatedBefore.IsZero() {
		q.Set("created_before", epochString(o.CreatedBefore))
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q.Encode()
}

// epochString writes t as epoch seconds with milliseconds.
func epochString(t time.Time) string {
	b, _ := epoch(t).MarshalJSON()
	return string(b)
}

// TaskPage is one page of the account's tasks, newest first.
type TaskPage struct {
	Tasks []*Task `json:"tasks"`
	// HasMore reports whether tasks follow the last one of the page.
	HasMore bool `json:"has_more"`
}

// ListTasks reads one page of the key's account's tasks, newest first.
// Options the server refuses (a status that does not exist, a StartingAfter
// that is not one of the account's tasks) are an error for which IsInvalid
// is true.
func (c *Client) ListTasks(ctx context.Context, opts ListOptions) (*TaskPage, error) {
	path := "/v1/tasks"
	if q := opts.query(); q != "" {
		path += "?" + q
	}
	var page TaskPage
	if err := c.do(ctx, call{method: http.MethodGet, path: path, auth: true}, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// TaskPages iterates over the pages of the account's tasks from opts on,
// each continuing after the last task of the one before, until a page says
// nothing follows. A failure is yielded once, with a nil page, and ends the
// iteration.
func (c *Client) TaskPages(ctx context.Context, opts ListOptions) iter.Seq2[*TaskPage, error] {
	return func(yield func(*TaskPage, error) bool) {
		for {
			page, err := c.ListTasks(ctx, opts)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(page, nil) || !page.HasMore {
				return
			}
			if len(page.Tasks) == 0 {
				yield(nil, fmt.Errorf("the server said more tasks follow an empty page"))
				return
			}
			opts.StartingAfter = page.Tasks[len(page.Tasks)-1].ID
		}
	}
}

// AllTasks iterates over the account's tasks that opts select, newest
// first, reading pages of opts.Limit as it goes (see TaskPages).
func (c *Client) AllTasks(ctx context.Context, opts ListOptions) iter.Seq2[*Task, error] {
	return func(yield func(*Task, error) bool) {
		for page, err := range c.TaskPages(ctx, opts) {
			if err != nil {
				yield(nil, err)
				return
			}
			for _, t := range page.Tasks {
				if !yield(t, nil) {
					return
				}
			}
		}
	}
}
