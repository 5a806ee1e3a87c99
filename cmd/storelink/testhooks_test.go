package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestServeHasNoTestHooks: the program reaches no raw-SQL test hook.
// Package dbtest, which gives tests raw SQL on the databases, is not among
// its dependencies, and no code of the module but dbtest and the SQLite
// driver's own tests calls sqlite.DB.TestAccess, dbtest's way in.
func TestServeHasNoTestHooks(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	if deps := strings.Fields(string(out)); slices.Contains(deps, "storelink/internal/dbtest") {
		t.Fatal("storelink depends on storelink/internal/dbtest, which is for tests only")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || rel == filepath.Join("internal", "dbtest") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || rel == filepath.Join("sqlite", "testaccess.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), ".TestAccess(") {
			t.Errorf("%s calls TestAccess, which only package dbtest may", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
