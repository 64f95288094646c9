//go:build unix

package db_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

func TestOpen_SQLiteFilesArePrivate(t *testing.T) {
	t.Parallel()
	// A permissive umask, so the modes seen are the ones the store asked for.
	defer syscall.Umask(syscall.Umask(0o022))
	path := filepath.Join(t.TempDir(), "arbiter.db")
	d := dbtest.OpenURL(t, "sqlite:"+path, db.Options{})
	if _, err := d.FindOrCreateAccountByEmail(ctx, "a@example.com"); err != nil {
		t.Fatal(err) // a write, so the -wal file exists
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		if mode := info.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %#o, want 0600", filepath.Base(f), mode)
		}
	}
}

func TestOpen_SQLiteKeepsAnExistingFilesMode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	if err := os.WriteFile(path, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	dbtest.OpenURL(t, "sqlite:"+path, db.Options{})
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o640 {
		t.Fatalf("an existing file's mode became %v (%v), want 0640 kept", info.Mode().Perm(), err)
	}
}
