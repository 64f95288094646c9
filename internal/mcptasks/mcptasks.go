// Package mcptasks holds what the Tasks utility of MCP (protocol
// 2025-11-25) looks like on the wire, for the two servers of the project
// that offer it on top of the Go SDK, which does not have it: mcpserver
// (ask_verdict) and the gateway (held tool calls).
package mcptasks

import "time"

// PollInterval is the polling interval a task handle suggests.
const PollInterval = 2 * time.Second

// RelatedTaskMeta is the _meta key that ties a result to its task.
const RelatedTaskMeta = "io.modelcontextprotocol/related-task"

// Handle is an MCP task: its id, its status (working, completed or
// failed), why, and when it was made and last changed.
type Handle struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is null: the servers keep a task until its answer is taken
	// (the gateway) or as long as its account (mcpserver).
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval"`
}
