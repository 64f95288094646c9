package db_test

import (
	"fmt"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// benchCreate is a create as the bench's API phase sends it: a ~200-byte
// prompt, ~1 KiB of context, three verdicts.
const benchCreate = `{"prompt":"A customer asks for a full refund of order ord_58213 because two items arrived broken. The photos in the ticket show cracked ceramic. Policy allows refunds within 30 days. Approve, reject or escalate?",
"allowed_verdicts":["approve","reject","escalate"],"confidence_threshold":0.85,"task_type":"refund","touchpoint":"email","source":"support-bot",
"context":{"currency":"EUR","customer":{"id":"cus_9921","orders":17,"since":"2021-04-02"},"items":[{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":1,"sku":"SKU-01000"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":2,"sku":"SKU-01001"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":3,"sku":"SKU-01002"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":1,"sku":"SKU-01003"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":2,"sku":"SKU-01004"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":3,"sku":"SKU-01005"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":1,"sku":"SKU-01006"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":2,"sku":"SKU-01007"}],"order_id":"ord_58213","total":199.2}}`

// BenchmarkFindTaskByID reads a task as a get reads it, from each store:
// one read at a time ("one"), and on Postgres reads from many goroutines
// at once, answered in groups ("grouped"), as under the bench's 32
// connections. Allocations per read are the figure to compare; the time
// is the machine's.
func BenchmarkFindTaskByID(b *testing.B) {
	for _, dialect := range dbtest.Dialects {
		d := dbtest.Open(b, dialect, db.Options{})
		acct, err := d.FindOrCreateAccountByEmail(ctx, "bench@example.com")
		if err != nil {
			b.Fatal(err)
		}
		in, err := arbiter.ParseTaskCreate([]byte(benchCreate))
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]string, 256)
		for i := range ids {
			task, err := d.CreateTask(ctx, acct.ID, in)
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = task.ID
		}
		b.Run(dialect+"/one", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := d.FindTaskByID(ctx, acct.ID, ids[i%len(ids)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		if dialect != db.Postgres {
			continue
		}
		b.Run(fmt.Sprintf("%s/grouped", dialect), func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := d.FindTaskByID(ctx, acct.ID, ids[i%len(ids)]); err != nil {
						b.Error(err)
						return
					}
					i += 7
				}
			})
		})
	}
}
