package db_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestCheckSchema tells a schema this build serves from one it does not:
// older (a migration missing), newer by additive migrations only, newer by
// a breaking one, or by one whose release did not say.
func TestCheckSchema(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Run("Current", func(t *testing.T) {
				d := dbtest.Open(t, dialect, db.Options{})
				state, err := d.CheckSchema(ctx)
				if err != nil || len(state.Missing)+len(state.Newer) > 0 || state.Err() != nil {
					t.Fatalf("a migrated store: %+v, %v, %v", state, err, state.Err())
				}
				if err := d.Ready(ctx); err != nil {
					t.Errorf("Ready on a migrated store = %v", err)
				}
			})
			t.Run("NeverMigrated", func(t *testing.T) {
				d, err := db.Open(ctx, dbtest.URL(t, dialect), db.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				versions, _ := d.MigrationVersions()
				state, err := d.CheckSchema(ctx)
				if err != nil || !slices.Equal(state.Missing, versions) {
					t.Fatalf("a store never migrated lacks %v, %v; want every migration %v", state.Missing, err, versions)
				}
				if err := d.Ready(ctx); arbiter.ErrorCode(err) != arbiter.EUNAVAILABLE || !strings.Contains(err.Error(), "`arbiter migrate`") {
					t.Errorf("Ready on a store never migrated = %v, want EUNAVAILABLE naming arbiter migrate", err)
				}
			})
			t.Run("Older", func(t *testing.T) {
				d, err := db.Open(ctx, dbtest.URL(t, dialect), db.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				versions, _ := d.MigrationVersions()
				last := versions[len(versions)-1]
				if err := d.MigrateUpTo(ctx, versions[len(versions)-2]); err != nil {
					t.Fatal(err)
				}
				state, err := d.CheckSchema(ctx)
				if err != nil || !slices.Equal(state.Missing, []int64{last}) {
					t.Fatalf("lacks %v, %v; want [%d]", state.Missing, err, last)
				}
				want := "The database's schema is older than this release of Arbiter needs (it lacks migration " + versionName(last) +
					"): run `arbiter migrate` with this release, then start it again."
				if err := state.Err(); arbiter.ErrorMessage(err) != want {
					t.Errorf("Err = %q, want %q", arbiter.ErrorMessage(err), want)
				}
			})
			for _, later := range []struct {
				name     string
				additive bool
				serves   bool
			}{{"NewerAdditive", true, true}, {"NewerBreaking", false, false}} {
				t.Run(later.name, func(t *testing.T) {
					d := dbtest.Open(t, dialect, db.Options{})
					if err := d.ApplyLaterMigration(ctx, 99001, `CREATE TABLE later_things (id TEXT PRIMARY KEY)`, true); err != nil {
						t.Fatal(err)
					}
					if err := d.ApplyLaterMigration(ctx, 99002, `ALTER TABLE attempts ADD COLUMN later_note TEXT NOT NULL DEFAULT ''`, later.additive); err != nil {
						t.Fatal(err)
					}
					state, err := d.CheckSchema(ctx)
					if err != nil || !slices.Equal(state.Newer, []int64{99001, 99002}) || len(state.Missing) > 0 {
						t.Fatalf("state = %+v, %v", state, err)
					}
					if later.serves {
						if err := state.Err(); err != nil {
							t.Fatalf("newer by additive migrations: %v", err)
						}
						// The hot path on the newer schema: create, claim, decide by the
						// agent, read back.
						acct := newAccount(t, d, "later@example.com")
						task, err := d.CreateTask(ctx, acct.ID, taskCreate("Refund?"))
						if err != nil {
							t.Fatalf("create on the newer schema: %v", err)
						}
						claimed, err := d.ClaimTasks(ctx, "w1", 10, time.Minute)
						if err != nil || len(claimed) != 1 {
							t.Fatalf("claim on the newer schema: %v, %v", claimed, err)
						}
						verdict := claimed[0].AllowedVerdicts[0]
						step := arbiter.NextAgentStep(claimed[0], arbiter.Verification{Decided: true, Verdict: verdict, Confidence: 0.99, Model: "m"},
							nil, time.Now(), time.Now(), arbiter.AgentRetry{})
						if err := d.FinishAgentAttempt(ctx, "w1", task.ID, step); err != nil {
							t.Fatalf("the agent's decision on the newer schema: %v", err)
						}
						got, err := d.FindTaskByID(ctx, acct.ID, task.ID)
						if err != nil || got.Status != arbiter.StatusCompleted || got.FinalVerdict == nil || *got.FinalVerdict != verdict {
							t.Fatalf("read back on the newer schema: %+v, %v", got, err)
						}
						return
					}
					if !slices.Equal(state.Breaking, []int64{99002}) {
						t.Fatalf("breaking = %v, want [99002]", state.Breaking)
					}
					want := "The database's schema is newer than this release of Arbiter can serve (migration 99002, applied by a later release, is not additive): run the release that migrated it."
					if err := state.Err(); arbiter.ErrorMessage(err) != want {
						t.Errorf("Err = %q, want %q", arbiter.ErrorMessage(err), want)
					}
					if err := d.Ready(ctx); arbiter.ErrorMessage(err) != want {
						t.Errorf("Ready = %v, want %q", err, want)
					}
				})
			}
			t.Run("NewerUnrecorded", func(t *testing.T) {
				d := dbtest.Open(t, dialect, db.Options{})
				if err := d.ApplyLaterMigration(ctx, 99003, `CREATE TABLE later_others (id TEXT PRIMARY KEY)`, true); err != nil {
					t.Fatal(err)
				}
				if err := d.ForgetSchemaChange(ctx, 99003); err != nil {
					t.Fatal(err)
				}
				if state, err := d.CheckSchema(ctx); err != nil || !slices.Equal(state.Breaking, []int64{99003}) {
					t.Fatalf("a later migration nobody said was additive: %+v, %v", state, err)
				}
			})
		})
	}
}

// TestMigrate_RecordsWhichAreAdditive: after Migrate, schema_changes says
// of every migration this build has whether it is additive, as Additive
// does, for an older release to read.
func TestMigrate_RecordsWhichAreAdditive(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		versions, _ := d.MigrationVersions()
		changes, err := d.SchemaChanges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var recorded []int64
		for v, additive := range changes {
			recorded = append(recorded, v)
			if additive != db.Additive(v) {
				t.Errorf("schema_changes says %d additive=%v, Additive says %v", v, additive, db.Additive(v))
			}
		}
		slices.Sort(recorded)
		if !slices.Equal(recorded, versions) {
			t.Errorf("schema_changes records %v, want %v", recorded, versions)
		}
	})
}

// breakingStatement matches what an older release cannot live with: a
// table or column dropped or renamed, a column changed or made NOT NULL,
// a constraint added to existing rows. A view made again with more
// columns is additive: releases read it by column name.
var breakingStatement = regexp.MustCompile(`(?i)\b(DROP\s+TABLE|DROP\s+COLUMN|RENAME|ALTER\s+COLUMN|SET\s+NOT\s+NULL|ADD\s+CONSTRAINT)\b`)

// addColumn matches a column added, to find one NOT NULL without a
// default, which an older release's inserts do not fill.
var addColumn = regexp.MustCompile(`(?i)ADD\s+COLUMN\s[^,;]*`)

// TestMigrations_BreakingAreListed reads every migration of both dialects:
// one that drops, renames or tightens must be in db's breaking list, or an
// older release would serve on a schema it cannot use.
func TestMigrations_BreakingAreListed(t *testing.T) {
	t.Parallel()
	comment := regexp.MustCompile(`(?m)--.*$`)
	for _, dialect := range dbtest.Dialects {
		up, err := db.MigrationUp(dialect)
		if err != nil {
			t.Fatal(err)
		}
		for version, text := range up {
			text = comment.ReplaceAllString(text, "")
			breaking := breakingStatement.MatchString(text)
			for _, m := range addColumn.FindAllString(text, -1) {
				if m = strings.ToUpper(m); strings.Contains(m, "NOT NULL") && !strings.Contains(m, "DEFAULT") {
					breaking = true
				}
			}
			if breaking && db.Additive(version) {
				t.Errorf("%s migration %05d drops, renames or tightens something: list it in db.breakingMigrations", dialect, version)
			}
		}
	}
}

// versionName writes a migration's version as its file name starts.
func versionName(v int64) string { return fmt.Sprintf("%05d", v) }
