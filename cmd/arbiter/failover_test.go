package main

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/testutil"
)

// pgClusters makes Postgres clusters of a test's own under one directory,
// with Debian's postgres binaries run as the postgres user.
type pgClusters struct {
	bin, root string
	uid, gid  int
}

// newPGClusters returns the test's clusters' maker, and skips the test
// when Debian's postgres binaries or the postgres user are missing
// (scripts/dev-postgres installs them).
func newPGClusters(t *testing.T) *pgClusters {
	t.Helper()
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		t.Skip("Debian's postgresql is not installed (scripts/dev-postgres installs it)")
	}
	pgUser, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("no postgres user to run a cluster as")
	}
	c := &pgClusters{bin: filepath.Dir(matches[len(matches)-1])}
	c.uid, _ = strconv.Atoi(pgUser.Uid)
	c.gid, _ = strconv.Atoi(pgUser.Gid)
	if os.Geteuid() != 0 && os.Geteuid() != c.uid {
		t.Skip("the failover drill runs its clusters as postgres: run it as root or postgres")
	}
	// Postgres refuses to run as root, and wants its directories its own.
	if c.root, err = os.MkdirTemp("", "arbiter-failover-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(c.root) })
	if err := os.Chmod(c.root, 0o755); err != nil {
		t.Fatal(err)
	}
	return c
}

// dir makes a directory of the postgres user's.
func (c *pgClusters) dir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(c.root, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, c.uid, c.gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// exec runs one of the postgres binaries as the postgres user.
func (c *pgClusters) exec(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(c.bin, name)}, args...)...)
	}
	cmd.Dir = c.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// run is exec that fails t.
func (c *pgClusters) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if err := c.exec(name, args...); err != nil {
		t.Fatal(err)
	}
}

// start starts the cluster in dir and stops it at the test's end.
func (c *pgClusters) start(t *testing.T, dir string) {
	t.Helper()
	if err := c.exec("pg_ctl", "-D", dir, "-w", "-l", filepath.Join(dir, "log"), "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		t.Fatalf("%v\n%s", err, log)
	}
	t.Cleanup(func() { _ = c.exec("pg_ctl", "-D", dir, "-m", "immediate", "stop") })
}

// primaryAndStandby starts a primary cluster on primaryHost and a
// streaming standby of it (pg_basebackup -R -X stream, hot standby) on
// standbyHost, each with its extra settings, and returns their
// directories and their port. Both take one port, as a deployment's two
// database hosts do: lib/pq's URL takes one port for all its hosts.
func (c *pgClusters) primaryAndStandby(t *testing.T, primaryHost, standbyHost string, primaryConf, standbyConf []string) (primary, standby string, port int) {
	t.Helper()
	primary, standby = c.dir(t, "primary"), c.dir(t, "standby")
	port = freeLoopbackPort(t)
	c.run(t, "initdb", "-D", primary, "-U", "postgres", "--auth=trust", "--no-sync")
	c.configure(t, primary, append([]string{"listen_addresses = '" + primaryHost + "'", fmt.Sprintf("port = %d", port),
		"unix_socket_directories = '" + c.dir(t, "primary-sockets") + "'", "wal_level = replica", "max_wal_senders = 4",
		"fsync = off", "max_connections = 60"}, primaryConf...)...)
	c.start(t, primary)
	c.run(t, "pg_basebackup", "-h", primaryHost, "-p", strconv.Itoa(port), "-U", "postgres", "-D", standby, "-R", "-X", "stream", "--no-sync")
	c.configure(t, standby, append([]string{"listen_addresses = '" + standbyHost + "'",
		"unix_socket_directories = '" + c.dir(t, "standby-sockets") + "'", "hot_standby = on"}, standbyConf...)...)
	c.start(t, standby)
	return primary, standby, port
}

// configure adds the lines to the settings of the cluster in dir.
func (c *pgClusters) configure(t *testing.T, dir string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}

// openDirect opens a pool on the postgres database of the cluster at
// host:port, closed when the test ends.
func openDirect(t *testing.T, host string, port int) *sql.DB {
	t.Helper()
	d, err := sql.Open("postgres", fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=disable", host, port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestFailover_PromotedStandbyKeepsEveryAcceptedTask is the failover
// drill: a primary with one synchronous standby (streaming replication
// from pg_basebackup, synchronous_commit on), `arbiter serve` on a URL
// that names both with target_session_attrs=read-write, and clients
// creating tasks with idempotency keys, sending again what was refused.
// The primary is stopped at once (as a crash) while the load runs and the
// standby promoted: every create that was answered is on the new
// primary, none twice, and the server writes again without a restart.
// It logs how long creates were refused.
func TestFailover_PromotedStandbyKeepsEveryAcceptedTask(t *testing.T) {
	t.Parallel()
	pg := newPGClusters(t)
	const primaryHost, standbyHost = "127.0.0.5", "127.0.0.6"
	primary, standby, port := pg.primaryAndStandby(t, primaryHost, standbyHost,
		[]string{"synchronous_commit = on", "synchronous_standby_names = 'standby'"},
		[]string{"cluster_name = 'standby'",
			// Promoted, it has no standby of its own to wait for (the
			// primary's setting came with the base backup).
			"synchronous_standby_names = ''"})

	onPrimary := openDirect(t, primaryHost, port)
	for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
		var state string
		_ = onPrimary.QueryRow(`SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'`).Scan(&state)
		if state == "sync" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby is not synchronous (%q)", state)
		}
	}

	url := fmt.Sprintf("postgres://postgres@%s,%s:%d/postgres?sslmode=disable&target_session_attrs=read-write", primaryHost, standbyHost, port)
	getenv := env(map[string]string{"ARBITER_DATABASE_URL": url, "ARBITER_DB_TIMEOUT": "2s"})
	base, serveLogs := serveWithLogs(t, getenv)
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))
	var before int // the demo's tasks
	if err := onPrimary.QueryRow(`SELECT count(*) FROM tasks`).Scan(&before); err != nil {
		t.Fatal(err)
	}

	const (
		total    = 200
		failAt   = 60
		senders  = 8
		attempts = 2000 // a create is sent again at most this often
	)
	var (
		answered  atomic.Int64
		mu        sync.Mutex
		ids       = map[string]string{}
		problems  []error
		refusedAt []time.Time // when a create was refused, the first and last
	)
	promoted := make(chan time.Time, 1)
	go func() {
		for answered.Load() < failAt {
			time.Sleep(5 * time.Millisecond)
		}
		// The primary goes as in a crash; the standby is promoted.
		err := pg.exec("pg_ctl", "-D", primary, "-m", "immediate", "stop")
		if err == nil {
			err = pg.exec("pg_ctl", "-D", standby, "-w", "promote")
		}
		if err != nil {
			mu.Lock()
			problems = append(problems, err)
			mu.Unlock()
		}
		promoted <- time.Now()
	}()
	var next atomic.Int64
	var clients sync.WaitGroup
	for range senders {
		clients.Go(func() {
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				idempotencyKey := fmt.Sprintf("drill-%d", i)
				body := fmt.Sprintf(`{"prompt":"Refund order %d?","allowed_verdicts":["approve","reject"]}`, i)
				var id string
				for try := 0; try < attempts && id == ""; try++ {
					status, task, err := apiSend("POST", base+"/v1/tasks", key, idempotencyKey, body)
					switch {
					case err == nil && status == http.StatusOK:
						id, _ = task["id"].(string)
					case err == nil && status == http.StatusServiceUnavailable:
						mu.Lock()
						refusedAt = append(refusedAt, time.Now())
						mu.Unlock()
						time.Sleep(20 * time.Millisecond)
					default:
						mu.Lock()
						problems = append(problems, fmt.Errorf("create %d = %d %v %v", i, status, task, err))
						mu.Unlock()
						return
					}
				}
				if id == "" {
					mu.Lock()
					problems = append(problems, fmt.Errorf("create %d was refused %d times", i, attempts))
					mu.Unlock()
					return
				}
				answered.Add(1)
				mu.Lock()
				ids[idempotencyKey] = id
				mu.Unlock()
			}
		})
	}
	clients.Wait()
	for _, err := range problems {
		t.Error(err)
	}
	if t.Failed() {
		t.Logf("serve:\n%s", serveLogs.String())
	}
	if len(ids) != total {
		t.Fatalf("%d creates answered, want %d", len(ids), total)
	}
	promotedAt := <-promoted
	onStandby := openDirect(t, standbyHost, port)
	var stored int
	if err := onStandby.QueryRow(`SELECT count(*) FROM tasks`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored-before != total {
		t.Errorf("the new primary holds %d tasks, want the %d answered", stored-before, total)
	}
	for idempotencyKey, id := range ids {
		var got string
		if err := onStandby.QueryRow(`SELECT task_id FROM idempotency_keys WHERE idempotency_key = $1`, idempotencyKey).Scan(&got); err != nil || got != id {
			t.Errorf("the create under %s answered %s is %q on the new primary (%v)", idempotencyKey, id, got, err)
		}
	}
	if len(refusedAt) == 0 {
		t.Log("no create was refused across the promotion")
		return
	}
	first, last := refusedAt[0], refusedAt[0]
	for _, at := range refusedAt {
		if at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	t.Logf("%d creates answered; %d refusals (503) over %v, from the first to the last; pg_ctl promote returned %v after the first",
		total, len(refusedAt), last.Sub(first).Round(time.Millisecond), promotedAt.Sub(first).Round(time.Millisecond))
}
