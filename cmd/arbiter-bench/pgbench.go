package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"
)

// pgbenchGetName names the raw read a get is held against (issue 50:
// get ≥ 0.5 × it).
const pgbenchGetName = "get (pgbench)"

// measurePgbench runs pgbench -M prepared at the bench's concurrency and
// for its duration on the get's own statement (statement, with $1 the
// task's id and $2 its account), each transaction reading one of the
// tasks the HTTP get phase read, picked at random through a numbered
// table in the same statement: the read a get makes, with nothing of
// the service around it. Without pgbench on the PATH it says so and
// measures nothing (false).
func (b *bench) measurePgbench(ctx context.Context, statement string) (result, bool, error) {
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		b.logf("pgbench is not installed: no %s phase", pgbenchGetName)
		return result{}, false, nil
	}
	conn, err := sql.Open("postgres", b.databaseURL)
	if err != nil {
		return result{}, false, err
	}
	defer conn.Close()
	ns, ids, accounts := make([]int64, len(b.ids)), make([]string, len(b.ids)), make([]string, len(b.ids))
	for i, t := range b.ids {
		ns[i], ids[i], accounts[i] = int64(i+1), t.id, t.accountID
	}
	if _, err := conn.ExecContext(ctx, `DROP TABLE IF EXISTS bench_get_ids;
		CREATE TABLE bench_get_ids (n bigint PRIMARY KEY, id text NOT NULL, account_id text NOT NULL)`); err != nil {
		return result{}, false, fmt.Errorf("pgbench table: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS bench_get_ids`)
	if _, err := conn.ExecContext(ctx, `INSERT INTO bench_get_ids SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])`,
		pq.Array(ns), pq.Array(ids), pq.Array(accounts)); err != nil {
		return result{}, false, fmt.Errorf("pgbench table: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `ANALYZE bench_get_ids`); err != nil {
		return result{}, false, fmt.Errorf("pgbench table: %w", err)
	}
	script, err := os.CreateTemp("", "arbiter-bench-get-*.sql")
	if err != nil {
		return result{}, false, err
	}
	defer os.Remove(script.Name())
	read := strings.NewReplacer("$1", "(SELECT id FROM bench_get_ids WHERE n = :n)",
		"$2", "(SELECT account_id FROM bench_get_ids WHERE n = :n)").Replace(statement)
	// pgbench reads a statement to the end of its line.
	read = strings.Join(strings.Fields(read), " ")
	if _, err := fmt.Fprintf(script, "\\set n random(1, %d)\n%s;\n", len(b.ids), read); err != nil {
		return result{}, false, err
	}
	if err := script.Close(); err != nil {
		return result{}, false, err
	}

	seconds := max(1, int(b.duration.Seconds()))
	b.logf("pgbench -M prepared, the get's statement, for %ds at %d connections", seconds, b.concurrency)
	cmd := exec.CommandContext(ctx, bin, "-n", "-M", "prepared", "-c", strconv.Itoa(b.concurrency), "-j", "2",
		"-T", strconv.Itoa(seconds), "-f", script.Name(), b.databaseURL)
	before := b.cpuNow()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return result{}, false, fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	r := result{name: pgbenchGetName, elapsed: time.Since(start), unitName: "reads/s", cpu: b.cpuNow().minus(before)}
	r.cpu.generator, r.cpu.server = 0, 0 // pgbench is neither
	tps, processed := pgbenchTPS.FindSubmatch(out), pgbenchProcessed.FindSubmatch(out)
	if tps == nil || processed == nil {
		return result{}, false, fmt.Errorf("pgbench: no tps in its output:\n%s", out)
	}
	r.perSec, _ = strconv.ParseFloat(string(tps[1]), 64)
	r.ops, _ = strconv.ParseInt(string(processed[1]), 10, 64)
	return r, true, nil
}

var (
	pgbenchTPS       = regexp.MustCompile(`tps = ([0-9.]+)`)
	pgbenchProcessed = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)
)
