package db

import (
	"context"

	"github.com/pressly/goose/v3"

	"github.com/arbiterhq/arbiter"
)

// InsertLabelledPairs stores pairs as a person's answers would, in one
// transaction, for tests of the calibration report.
func (d *DB) InsertLabelledPairs(ctx context.Context, pairs []arbiter.LabelledPair) error {
	return d.transact(ctx, func(tx *Tx) error {
		for _, p := range pairs {
			if err := d.storeLabelledPair(ctx, tx, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// URLForTest returns the address the store was opened with, so a test can
// open a second store on the same database, as another process would.
func (d *DB) URLForTest() string { return d.url }

// UndoMigrationForTest rolls back the one migration version, leaving the
// later ones applied.
func (d *DB) UndoMigrationForTest(ctx context.Context, version int64) error {
	return d.withMigrations(func(p *goose.Provider) error {
		_, err := p.ApplyVersion(ctx, version, false)
		return err
	})
}

// UndoMigrationsDownToForTest rolls back every migration from the newest
// down to version, that one included, newest first: the store as it was
// before version was applied.
func (d *DB) UndoMigrationsDownToForTest(ctx context.Context, version int64) error {
	return d.withMigrations(func(p *goose.Provider) error {
		_, err := p.DownTo(ctx, version-1)
		return err
	})
}
