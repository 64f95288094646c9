// Package db is Arbiter's store: sqlx over Postgres (lib/pq) or SQLite
// (modernc.org/sqlite), implementing the service interfaces of the root
// package. Dialect differences live here and nowhere else.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // registers the "postgres" driver
	"modernc.org/sqlite"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db/internal/pglisten"
	"github.com/arbiterhq/arbiter/db/internal/sqlitegate"
	"github.com/arbiterhq/arbiter/internal/limits"
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

// Dialects the store speaks.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// DefaultURL is the store used when no database URL is configured: an SQLite
// file in the working directory.
const DefaultURL = "sqlite:arbiter.db"

// Options tune a store.
type Options struct {
	// DailyTaskCap is the cap of accounts without their own (0 means
	// arbiter.DefaultDailyTaskCap).
	DailyTaskCap int
	// Now is the store's clock (default time.Now).
	Now arbiter.Clock
	// MaxOpenConns bounds the connection pool (default 8 on both).
	MaxOpenConns int
	// Timeout bounds each call to the store, the wait for a connection
	// and for locks included (default DefaultTimeout; see timeout.go).
	Timeout time.Duration
	// IdempotencyTTL is how long an idempotency key is remembered after
	// its first use (default arbiter.DefaultIdempotencyTTL); the worker
	// deletes it after that.
	IdempotencyTTL time.Duration
	// Logger receives what the store handles itself, such as a grouped
	// statement that failed and was retried call by call, or the Postgres
	// task listener's connection troubles (default slog.Default()).
	Logger *slog.Logger
	// MaxCalibrationPairs bounds the labelled pairs a calibration report
	// reads (default arbiter.MaxCalibrationPairs); tests lower it.
	MaxCalibrationPairs int
	// Drift is the calibration drift window and bound (zero fields:
	// arbiter.DefaultDriftSettings).
	Drift arbiter.DriftSettings
	// AllowDotlessEmail lets sign-in links, identities and invitations use
	// addresses at a domain without a dot, such as you@localhost
	// (arbiter.CheckEmailDomain): for development only.
	AllowDotlessEmail bool
	// SessionIdle ends a session unused for that long (default
	// arbiter.DefaultSessionIdle).
	SessionIdle time.Duration
	// Ungrouped gives every create and every task read its own statement
	// on Postgres instead of grouping concurrent ones (db/internal/group); the
	// benchmark's one-statement ceilings use it.
	Ungrouped bool
	// Secrets seals the secrets the store keeps (webhook secrets, Slack
	// tokens) at rest (secrets.go); nil keeps webhook secrets in
	// plaintext, as before ARBITER_SECRET_KEY, and refuses Slack.
	Secrets *secretbox.Keyring
	// QuotingMailsPerDay bounds the mails that quote an account's
	// callers' text written for it in a UTC day (default
	// arbiter.DefaultQuotingMailsPerDay); tests lower it.
	QuotingMailsPerDay int
	// ListenURL is a direct connection to the Postgres database, for
	// what needs a session of its own: the task listener's LISTEN and
	// the migration lock (default the store's URL). Behind a
	// transaction-pooling pooler it must bypass the pooler.
	ListenURL string
	// TransactionPooler says the store's URL reaches Postgres through a
	// pooler in transaction mode (PgBouncer pool_mode=transaction):
	// statements are not prepared on the server and the session sets
	// nothing (postgresConnector); it needs ListenURL.
	TransactionPooler bool
	// ReadURL is a Postgres read replica (a streaming standby) for the
	// heavy reads that may be a little stale: calibration reports,
	// agreement, reviewer stats, task lists and the audit log (readPool).
	// Empty, they read the primary. The hot path (create, get, claim,
	// decide) and every write always use the store's URL. Postgres only;
	// it takes TransactionPooler as the store's URL does.
	ReadURL string
	// GoldDraw is the random source of the desk's gold rate
	// (arbiter.GoldFirst): uniform in [0, 1), default math/rand/v2's
	// Float64; tests make it deterministic.
	GoldDraw func() float64
	// LimitLinger is how long, on Postgres, a process keeps slots of a
	// shared limit reserved in a block and unused before it gives them
	// back (internal/limits; 0 means 2 s). Tests shorten or lengthen it.
	LimitLinger time.Duration
}

// DB is an open store. Its methods implement the root package's services;
// each public call is one transaction or one statement.
type DB struct {
	db      *sqlx.DB
	dialect string
	now     arbiter.Clock
	cap     int
	log     *slog.Logger
	timeout time.Duration
	// url is the database's address; listenURL, the direct one for
	// Migrate's own connection and the Postgres task listener's
	// (Options.ListenURL).
	url, listenURL string
	// replica is the pool of Options.ReadURL; nil without one
	// (readPool).
	replica *sqlx.DB
	// writeGate gives the SQLite store's connections turns to write
	// (db/internal/sqlitegate); nil on Postgres.
	writeGate *sqlitegate.Gate
	// goldDraw is Options.GoldDraw with its default.
	goldDraw func() float64
	// writes counts failed writes for Health.
	writes writeHealth
	// health shares and keeps Health's look at the store; ready, Ready's.
	health, ready healthCheck

	idempotencyTTL time.Duration

	// allowDotlessEmail is Options.AllowDotlessEmail.
	allowDotlessEmail bool
	// sessionIdle is Options.SessionIdle.
	sessionIdle time.Duration

	// calibrationCap bounds the pairs a calibration report reads.
	calibrationCap int
	// drift is Options.Drift with its defaults.
	drift arbiter.DriftSettings
	// calibrations keeps calibration reports' data and runs their reads.
	calibrations calibrationCache
	// demoHistory is set once the demo's labelled pairs are known to be
	// stored (SeedDemoHistory).
	demoHistory atomic.Bool

	// creates, reads and finishes group concurrent creates, task reads
	// and agent finishes on Postgres unless ungrouped.
	creates   createGroup
	reads     readGroup
	finishes  finishGroup
	ungrouped bool

	// decisions bounds the human decisions of an account that run at
	// once (chainTurnsPerAccount).
	decisions accountTurns

	// policies keeps accounts' policies for creates (policy.go).
	policies policyCache
	// secrets is Options.Secrets.
	secrets *secretbox.Keyring

	// claims are the claim statements of the store's dialect, assembled
	// once (claimTasksSQL, claimWebhooksSQL).
	claims struct{ tasks, tasksStarted, webhooks string }
	// watchers wake requests waiting for tasks (watch.go).
	watchers watchers
	// listener is the process's LISTEN connection on Postgres, opened at
	// the first watch; it wakes the watchers (watch.go).
	listener *pglisten.Listener
	// announcer tells other processes' workers of creates (announce.go).
	announcer *pglisten.Sender

	// outboxes are the outbound channels every publish reaches
	// (outbox.go), registered in Open.
	outboxes []outbox

	// receiptKeys keeps the receipt keys opened so far, by id
	// (receipt.go).
	receiptKeys sync.Map // string → arbiter.ReceiptKey
	// signer is the signing key this process read last, kept for
	// signerTTL (receipt.go); nil before the first decision.
	signer atomic.Pointer[signer]

	// limits are the deployment's limits (internal/limits): in
	// Postgres, shared by every process; in memory on SQLite. shared is
	// the Postgres one, closed with the store.
	limits limits.Limits
	shared *limits.Shared

	// stmts caches the hot path's prepared statements by query text, so
	// the database plans each once per connection, not once per call.
	stmts sync.Map // string → *sql.Stmt
}

// Open connects to the store named by rawURL: "postgres://…" (or
// "postgresql://…") selects Postgres; "sqlite:PATH" or a plain path selects
// SQLite; "" means DefaultURL. It does not migrate; call Migrate.
func Open(ctx context.Context, rawURL string, opts Options) (*DB, error) {
	if rawURL == "" {
		rawURL = DefaultURL
	}
	opts = opts.withDefaults()
	if opts.TransactionPooler && opts.ListenURL == "" {
		return nil, errors.New("a store behind a transaction pooler needs a direct connection for LISTEN and migrations (ARBITER_DATABASE_LISTEN_URL)")
	}
	if opts.ListenURL == "" {
		opts.ListenURL = rawURL
	}
	d := &DB{now: opts.Now, cap: opts.DailyTaskCap, log: opts.Logger, timeout: opts.Timeout, url: rawURL, listenURL: opts.ListenURL,
		idempotencyTTL: opts.IdempotencyTTL, ungrouped: opts.Ungrouped,
		calibrationCap: opts.MaxCalibrationPairs, allowDotlessEmail: opts.AllowDotlessEmail,
		sessionIdle: opts.SessionIdle, drift: driftSettingsOf(opts.Drift), secrets: opts.Secrets, goldDraw: opts.GoldDraw}
	if d.goldDraw == nil {
		d.goldDraw = rand.Float64
	}
	d.policies.reads.Joined = func(k policyReadKey) { policyReadJoined(k.accountID) }
	d.register(newWebhookOutbox(d))
	d.register(newSlackOutbox(d))
	d.register(newMailOutbox(d, opts.QuotingMailsPerDay))
	d.register(newTeamsOutbox(d))
	d.watchers.created = make(chan struct{}, 1)
	d.listener = pglisten.New(opts.ListenURL, taskChannel, "task listener", opts.Logger, d.watchers.heard, d.watchers.wakeAll)
	d.announcer = pglisten.NewSender(createdGap, d.notifyCreated, func(err error) {
		d.log.Warn("notify other workers of new tasks", "error", err.Error())
	})
	d.creates.Run, d.creates.Timeout = d.storeGroup, opts.Timeout
	d.reads.Run, d.reads.Timeout = d.readGroupOf, opts.Timeout
	d.finishes.Run, d.finishes.Timeout, d.finishes.Max = d.finishGroupOf, opts.Timeout, maxFinishGroup

	if err := d.openPool(rawURL, opts.Timeout, opts.TransactionPooler); err != nil {
		return nil, err
	}
	d.limits = limits.Local{Now: d.now}
	d.decisions.most = chainTurnsPerAccount
	if d.dialect == Postgres {
		d.shared = limits.NewShared(d.db.DB, limits.Options{Logger: d.log, Timeout: d.timeout, Unavailable: d.unavailable, Linger: opts.LimitLinger})
		d.limits = d.shared
	}
	d.claims.tasks, d.claims.tasksStarted = d.claimTasksSQL(false), d.claimTasksSQL(true)
	d.claims.webhooks = d.claimWebhooksSQL()
	// Few connections serve many requests: a query holds one for well
	// under a millisecond, concurrent calls share statements (db/internal/group), and
	// more backends than the database has cores only take turns on them.
	// On SQLite, WAL lets readers run beside the single writer, and writers
	// take turns in the order they came (db/internal/sqlitegate).
	pool := 8
	if opts.MaxOpenConns > 0 {
		pool = opts.MaxOpenConns
	}
	d.db.SetMaxOpenConns(pool)
	d.db.SetMaxIdleConns(pool)
	d.db.SetConnMaxIdleTime(5 * time.Minute)
	if err := d.openReplica(opts.ReadURL, pool, opts.Timeout, opts.TransactionPooler); err != nil {
		d.db.Close()
		return nil, err
	}
	if err := d.connect(ctx, opts.Timeout); err != nil {
		d.Close()
		return nil, fmt.Errorf("connect to %s store: %w", d.dialect, err)
	}
	return d, nil
}

// openReplica opens the pool of the read replica at readURL, sized and
// bounded as the primary's, when there is one. It does not connect: a
// replica that is down fails the heavy reads (503), never the start or
// the hot path.
func (d *DB) openReplica(readURL string, pool int, timeout time.Duration, pooled bool) error {
	switch {
	case readURL == "":
		return nil
	case d.dialect != Postgres:
		return errors.New("a read replica (ARBITER_DATABASE_READ_URL) is a Postgres standby; an SQLite store has none: unset it")
	case !strings.HasPrefix(readURL, "postgres://") && !strings.HasPrefix(readURL, "postgresql://"):
		return errors.New("the read replica's URL (ARBITER_DATABASE_READ_URL) must be a postgres:// URL")
	}
	connector, err := postgresConnector(readURL, timeout, pooled)
	if err != nil {
		return fmt.Errorf("open the read replica: %w", err)
	}
	d.replica = sqlx.NewDb(sql.OpenDB(connector), "postgres")
	d.replica.SetMaxOpenConns(pool)
	d.replica.SetMaxIdleConns(pool)
	d.replica.SetConnMaxIdleTime(5 * time.Minute)
	return nil
}

// readPool is the pool of the heavy reads that may lag the primary by the
// replica's replication lag (docs/scaling.md, "Read replicas"): the read
// replica's, else the primary's. Nothing that writes, and nothing on the
// hot path (create, get, claim, decide), reads through it.
func (d *DB) readPool() *sqlx.DB {
	if d.replica != nil {
		return d.replica
	}
	return d.db
}

// withDefaults returns o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.DailyTaskCap == 0 {
		o.DailyTaskCap = arbiter.DefaultDailyTaskCap
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IdempotencyTTL <= 0 {
		o.IdempotencyTTL = arbiter.DefaultIdempotencyTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = arbiter.DefaultSessionIdle
	}
	if o.MaxCalibrationPairs <= 0 {
		o.MaxCalibrationPairs = arbiter.MaxCalibrationPairs
	}
	return o
}

// openPool opens the connection pool of rawURL's dialect: Postgres for
// "postgres://" and "postgresql://", else an SQLite file (created private),
// whose writers take turns through the write gate.
func (d *DB) openPool(rawURL string, timeout time.Duration, pooled bool) error {
	switch {
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		d.dialect = Postgres
		connector, err := postgresConnector(rawURL, timeout, pooled)
		if err != nil {
			return fmt.Errorf("open postgres: %w", err)
		}
		d.db = sqlx.NewDb(sql.OpenDB(connector), "postgres")
	case pooled:
		return errors.New("a transaction pooler stands in front of Postgres only; the store's URL names an SQLite file")
	default:
		d.dialect = SQLite
		path := strings.TrimPrefix(rawURL, "sqlite:")
		if err := createPrivate(path); err != nil {
			return fmt.Errorf("open sqlite: %w", err)
		}
		connector, err := sqlite.NewConnector(sqliteDSN(path, timeout))
		if err != nil {
			return fmt.Errorf("open sqlite: %w", err)
		}
		d.writeGate = sqlitegate.New(timeout)
		d.db = sqlx.NewDb(sql.OpenDB(d.writeGate.Connector(connector)), "sqlite")
	}
	return nil
}

// connect opens the pool's first connection. A new SQLite connection
// turns WAL on, which takes the file's exclusive lock for a moment; when
// another process opening or migrating the file at the same time holds a
// lock that waiting could deadlock with, SQLite answers SQLITE_BUSY at once
// instead of waiting out busy_timeout. Such a connection is tried again,
// every 10 ms, until the store's timeout.
func (d *DB) connect(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := d.db.PingContext(ctx)
		if !sqliteBusyError(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// createPrivate creates the SQLite file at path readable and writable by
// this user alone (0600) when it does not exist yet; SQLite gives the -wal
// and -shm files it creates beside it the same permissions. An existing
// file keeps the permissions its owner chose, and in-memory databases have
// no file.
func createPrivate(path string) error {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	} else if err != nil {
		return err
	}
	return f.Close()
}

// sqliteDSN escapes path as a file: URI and adds the pragmas every connection needs: WAL, a busy timeout so
// writers queue for the write lock instead of failing, up to the store's
// timeout, foreign keys, and transactions that take the write lock up front
// so two writers never deadlock.
func sqliteDSN(path string, timeout time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", timeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	// In a file: URI, "#" would end the path and "?" start the query, so a
	// path holding them (a test's temporary directory, "Fresh#01") would
	// open another file; SQLite decodes the escapes.
	escaped := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
	return "file:" + escaped + "?" + q.Encode()
}

// Limits returns the deployment's limits: kept in Postgres and shared by
// every process of the deployment, or, on SQLite, whose one process is
// the deployment, in this process's memory.
func (d *DB) Limits() limits.Limits { return d.limits }

// LimitState returns the states several processes change in turns (a
// verifier provider's limiter), kept in Postgres; nil on SQLite, where
// the one process keeps them itself.
func (d *DB) LimitState() limits.State {
	if d.shared == nil {
		return nil
	}
	return d.shared
}

// Dialect returns Postgres or SQLite.
func (d *DB) Dialect() string { return d.dialect }

// Close stops the task listener and closes the prepared statements and
// the connection pool.
func (d *DB) Close() error {
	if d.shared != nil {
		d.shared.Close()
	}
	d.listener.Close()
	d.announcer.Close()
	d.stmts.Range(func(_, s any) bool {
		s.(*sql.Stmt).Close()
		return true
	})
	if d.replica != nil {
		d.replica.Close()
	}
	return d.db.Close()
}

// stmt returns the prepared statement of query (written with ?
// placeholders); database/sql prepares it on each connection the first time
// it runs there. Get it before a transaction begins and bind it with
// tx.StmtContext: preparing takes a connection of the pool, which a
// transaction waiting on a full pool would never get.
func (d *DB) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s, ok := d.stmts.Load(query)
	if !ok {
		prepared, err := d.db.PrepareContext(ctx, d.rebind(query))
		if err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		var loaded bool
		if s, loaded = d.stmts.LoadOrStore(query, prepared); loaded {
			prepared.Close()
		}
	}
	return s.(*sql.Stmt), nil
}

// rebind turns a query written with ? placeholders into the dialect's form.
func (d *DB) rebind(query string) string { return d.db.Rebind(query) }

// selectIn runs query, written with ? placeholders, one of which stands in
// IN (?) for a slice of args (sqlx.In), with q (the pool or a
// transaction), into dest.
func (d *DB) selectIn(ctx context.Context, q sqlx.QueryerContext, dest any, query string, args ...any) error {
	query, args, err := sqlx.In(query, args...)
	if err != nil {
		return err
	}
	return sqlx.SelectContext(ctx, q, dest, d.rebind(query), args...)
}

// queryIn is selectIn for rows the caller scans.
func (d *DB) queryIn(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) (*sql.Rows, error) {
	query, args, err := sqlx.In(query, args...)
	if err != nil {
		return nil, err
	}
	return q.QueryContext(ctx, d.rebind(query), args...)
}

// execIn is selectIn for a statement that returns no rows.
func (d *DB) execIn(ctx context.Context, q sqlx.ExecerContext, query string, args ...any) (sql.Result, error) {
	query, args, err := sqlx.In(query, args...)
	if err != nil {
		return nil, err
	}
	return q.ExecContext(ctx, d.rebind(query), args...)
}

// nowMS returns the store clock's time as a Timestamp.
func (d *DB) nowMS() arbiter.Timestamp { return arbiter.TimestampOf(d.now()) }

// notFound maps sql.ErrNoRows to an ENOTFOUND error with msg and wraps any
// other error.
func notFound(err error, msg string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return arbiter.Errorf(arbiter.ENOTFOUND, "%s", msg)
	}
	return err
}
