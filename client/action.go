package client

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/arbiterhq/arbiter/internal/jcs"
)

// ActionCreate is the tool call a task asks about (TaskCreate.Action).
type ActionCreate struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// Args are the tool's arguments: any value that encodes as a JSON
	// object; a json.RawMessage is sent as it is.
	Args any `json:"args"`
	// Schema, when set, is the JSON Schema the args satisfy, and every
	// edit must.
	Schema any `json:"schema,omitempty"`
	// Editable names the members of Args a reviewer may change.
	Editable []string `json:"editable,omitempty"`
}

// Action is a task's proposed action: its args in RFC 8785 canonical form
// and their digest.
type Action struct {
	Name     string          `json:"name"`
	Args     json.RawMessage `json:"args"`
	Schema   json.RawMessage `json:"schema,omitempty"`
	Editable []string        `json:"editable,omitempty"`
	Digest   string          `json:"digest"`
}

// ApprovedAction is the action a final decision approved. Execute exactly
// Name(Args), once.
type ApprovedAction struct {
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args"`
	Digest string          `json:"digest"`
	// Edited is true when a reviewer changed the args; Patch is then the
	// RFC 6902 JSON Patch from the proposed args, and EditedBy who.
	Edited         bool            `json:"edited"`
	ProposedDigest string          `json:"proposed_digest"`
	Patch          json.RawMessage `json:"patch,omitempty"`
	EditedBy       *string         `json:"edited_by,omitempty"`
}

// ErrActionDigest is the error of an approved action whose name and args
// are not the ones its digest names: run nothing.
var ErrActionDigest = errors.New("the approved action's digest does not match its name and args")

// ErrNotApproved is the error of a task whose final decision approved no
// action: it is not completed, has no action, or was decided with a
// verdict that does not approve it (see ApprovedAction).
var ErrNotApproved = errors.New("the task approved no action")

// ApprovedAction returns the action t's final decision approved, after
// checking that its digest is its name's and args' (the RFC 8785 form);
// approving names the verdicts that approve it (none: any final verdict).
// It returns ErrNotApproved when the task is not completed with one of
// them or has no approved action, and ErrActionDigest when the digest does
// not match: then nothing must run.
func (t *Task) ApprovedAction(approving ...string) (*ApprovedAction, error) {
	if t.Status != StatusCompleted || t.Approved == nil || t.FinalVerdict == nil {
		return nil, ErrNotApproved
	}
	if len(approving) > 0 {
		ok := false
		for _, v := range approving {
			ok = ok || v == *t.FinalVerdict
		}
		if !ok {
			return nil, fmt.Errorf("%w: the verdict is %q", ErrNotApproved, *t.FinalVerdict)
		}
	}
	a := *t.Approved
	if digest, err := ActionDigest(a.Name, a.Args); err != nil || digest != a.Digest {
		return nil, ErrActionDigest
	}
	return &a, nil
}

// ActionDigest returns the digest the server gives the action name(args):
// "sha256:" and the hex SHA-256 of the RFC 8785 form of {"args", "name"}.
// It fails for args that are not I-JSON.
func ActionDigest(name string, args json.RawMessage) (string, error) {
	canonical, err := jcs.Canonicalize(args)
	if err != nil {
		return "", err
	}
	return jcs.ActionDigest(name, canonical), nil
}
