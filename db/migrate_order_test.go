package db_test

import (
	"testing"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestMigrate_AppliesAMigrationThatLandedLate opens a store that has the
// migrations up to 00013 but 00011, as a store migrated before 00011 landed
// on top of later ones would be: migrating applies it instead of refusing
// to start. (00029, which makes tasks a view, 00025, which replaces its queue
// index, and 00015, which indexes a column of 00011, came after and are
// undone first.)
func TestMigrate_AppliesAMigrationThatLandedLate(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		for _, version := range []int64{29, 25, 15, 11} {
			if err := d.UndoMigrationForTest(ctx, version); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.AuditRate(ctx, "acct_demo"); err == nil {
			t.Fatal("the audit rate is still there after undoing 00011")
		}
		if err := d.Migrate(ctx); err != nil {
			t.Fatalf("migrating a store that misses 00011: %v", err)
		}
		if _, err := d.AuditRate(ctx, "acct_demo"); err != nil {
			t.Errorf("00011 was not applied: %v", err)
		}
	})
}
