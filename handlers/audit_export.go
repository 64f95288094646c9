package handlers

import (
	"bufio"
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// AuditExport handles GET /v1/audit/export?since=…: the account's audit
// export as JSON Lines (arbiter.VerifyAuditExport says what it holds),
// streamed as the store reads it. A bad query, or a failure before the
// first bytes leave, is an error answer; a failure once the stream began
// ends it early, and the export, missing its signed end line, then does
// not verify.
func AuditExport(exports arbiter.AuditExportService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		since, err := arbiter.ParseAuditExportQuery(r.URL.Query())
		if err != nil {
			Error(w, r, err)
			return
		}
		accountID := arbiter.AccountIDFromContext(r.Context())
		sent := &sentWriter{w: w}
		out := bufio.NewWriterSize(sent, 64<<10)
		if err = exports.ExportAudit(r.Context(), accountID, since, out); err == nil {
			err = out.Flush()
		}
		switch {
		case err != nil && !sent.started:
			Error(w, r, err)
		case err != nil:
			LoggerFromContext(r.Context()).WarnContext(r.Context(), "the audit export stopped early", "account_id", accountID, "error", err.Error())
		}
	})
}

// sentWriter writes an export's bytes to w, with its headers before the
// first, and says whether any left.
type sentWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *sentWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Content-Disposition", `attachment; filename="arbiter-audit.jsonl"`)
		h.Set("Cache-Control", "no-store")
	}
	return s.w.Write(p)
}
