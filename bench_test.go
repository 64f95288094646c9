package arbiter_test

import (
	"encoding/json"
	"testing"

	"github.com/arbiterhq/arbiter"
)

var benchBody = []byte(`{"prompt":"A customer asks for a full refund of order ord_58213 because two items arrived broken. Approve, reject or escalate?",
"allowed_verdicts":["approve","reject","escalate"],"confidence_threshold":0.85,"task_type":"refund","touchpoint":"email",
"source":"support-bot","context":{"order_id":"ord_58213","items":[{"sku":"SKU-01000","qty":1,"price":24.9},{"sku":"SKU-01001","qty":2,"price":24.9}],"total":74.7}}`)

func BenchmarkParseTaskCreate(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchBody)))
	for b.Loop() {
		if _, err := arbiter.ParseTaskCreate(benchBody); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTask_MarshalJSON(b *testing.B) {
	verdict, tier, conf, model := "approve", "agent", 0.93, "gpt-4o-mini"
	done := arbiter.Timestamp(1763805601456)
	task := &arbiter.Task{
		ID: "tsk_0123456789abcdef", Status: arbiter.StatusCompleted, TaskType: "refund", Source: "support-bot",
		Touchpoint: "email", Prompt: "A customer asks for a full refund of order ord_58213 because two items arrived broken.",
		AllowedVerdicts: []string{"approve", "reject", "escalate"}, ConfidenceThreshold: 0.85,
		FinalVerdict: &verdict, FinalTier: &tier, FinalConfidence: &conf, CreatedAt: 1763805600123, CompletedAt: &done,
		Attempts: []arbiter.Attempt{{Tier: tier, Verdict: &verdict, Confidence: &conf, Rationale: "Photos show damage.",
			Model: &model, StartedAt: 1763805600200, FinishedAt: &done}},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(task); err != nil {
			b.Fatal(err)
		}
	}
}

// batchBenchBody is a batch of 100 copies of benchBody, as the HTTP bench
// sends.
var batchBenchBody = func() []byte {
	items := make([]json.RawMessage, 100)
	for i := range items {
		items[i] = benchBody
	}
	b, _ := json.Marshal(map[string]any{"tasks": items})
	return b
}()

func BenchmarkParseTaskBatch(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(batchBenchBody)))
	for b.Loop() {
		items, err := arbiter.ParseTaskBatch(batchBenchBody)
		if err != nil || items[99].Err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTask_AppendJSON encodes the task of BenchmarkTask_MarshalJSON
// as the API's answers do, into a buffer kept between calls.
func BenchmarkTask_AppendJSON(b *testing.B) {
	verdict, tier, conf, model := "approve", "agent", 0.93, "gpt-4o-mini"
	done := arbiter.Timestamp(1763805601456)
	task := &arbiter.Task{
		ID: "tsk_0123456789abcdef", Status: arbiter.StatusCompleted, TaskType: "refund", Source: "support-bot",
		Touchpoint: "email", Prompt: "A customer asks for a full refund of order ord_58213 because two items arrived broken.",
		AllowedVerdicts: []string{"approve", "reject", "escalate"}, ConfidenceThreshold: 0.85,
		FinalVerdict: &verdict, FinalTier: &tier, FinalConfidence: &conf, CreatedAt: 1763805600123, CompletedAt: &done,
		Attempts: []arbiter.Attempt{{Tier: tier, Verdict: &verdict, Confidence: &conf, Rationale: "Photos show damage.",
			Model: &model, StartedAt: 1763805600200, FinishedAt: &done}},
	}
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		var err error
		if buf, err = task.AppendJSON(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
