package handlers

import (
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ReviewBulk handles POST /review/bulk: the queue's marked tasks, decided
// with one verdict and one rationale. Decisions are people's, so this
// lives on the reviewer site, never the API. The first post answers a
// page that states how many tasks will be decided and lists them (the
// confirm step); its form, posted with confirm=yes, decides each task on
// its own, as DecideTask would one at a time: its own attempt, audit line
// and receipt, bound to the action the queue showed. Only the marked
// tasks, by id, and only as arbiter.CheckBulk allows (no consensus, no
// blind audit, one action at most); a refusal changes nothing and says
// why. The queue then follows, with what was decided and what was not.
func ReviewBulk(tasks arbiter.TaskService, queue arbiter.QueueService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		page := PageOf(r, "Decide the marked tasks", "review")
		v, err := bulkForm(r)
		if err != nil {
			Render(w, r, StatusOf(err), review.BulkPage(page, review.BulkView{Error: arbiter.ErrorMessage(err)}))
			return
		}
		marks := v.Marks
		for _, m := range marks {
			t, err := tasks.FindTaskByID(r.Context(), s.AccountID, m.TaskID)
			if err != nil {
				if arbiter.ErrorCode(err) == arbiter.ENOTFOUND {
					err = arbiter.Errorf(arbiter.EINVALID, "A marked task is not in this account's queue.")
				}
				Render(w, r, StatusOf(err), review.BulkPage(page, review.BulkView{Error: arbiter.ErrorMessage(err)}))
				return
			}
			v.Tasks = append(v.Tasks, t)
		}
		if err := arbiter.CheckBulk(v.Tasks, marks, v.Verdict); err != nil {
			v.Error = arbiter.ErrorMessage(err)
			Render(w, r, StatusOf(err), review.BulkPage(page, v))
			return
		}
		if r.PostForm.Get("confirm") != "yes" {
			Render(w, r, http.StatusOK, review.BulkPage(PageOf(r, v.Question(), "review"), v))
			return
		}
		decided, refused := 0, []string{}
		for i, m := range marks {
			_, err := queue.DecideTask(r.Context(), s.AccountID, m.TaskID, arbiter.HumanDecision{
				Verdict: v.Verdict, Rationale: v.Rationale, Reviewer: s.Email, ReviewerID: s.PersonID, Client: ClientOf(r),
				Via: "the desk, in bulk", ActionDigest: m.Digest,
			})
			if err != nil {
				refused = append(refused, fmt.Sprintf("“%s”: %s", arbiter.ShortPrompt(v.Tasks[i].Prompt), arbiter.ErrorMessage(err)))
				continue
			}
			decided++
		}
		notice := fmt.Sprintf("Decided %d of the %d marked tasks “%s”.", decided, len(marks), v.Verdict)
		for _, why := range refused {
			notice += " Not decided: " + why
		}
		setNotice(w, r, notice)
		redirect(w, r, "/review")
	})
}

// bulkForm reads a bulk decision's form: the marks, the verdict and the
// rationale. Returns EINVALID for a form without them.
func bulkForm(r *http.Request) (review.BulkView, error) {
	if err := r.ParseForm(); err != nil {
		return review.BulkView{}, arbiter.Errorf(arbiter.EINVALID, "The form could not be read.")
	}
	marks, err := arbiter.ParseBulkMarks(r.PostForm["task"])
	if err != nil {
		return review.BulkView{}, err
	}
	v := review.BulkView{Marks: marks, Verdict: r.PostForm.Get("verdict"), Rationale: r.PostForm.Get("rationale")}
	if v.Verdict == "" {
		return review.BulkView{}, arbiter.Errorf(arbiter.EINVALID, "Pick the verdict for the marked tasks.")
	}
	return v, arbiter.ValidateRationale(v.Rationale)
}
