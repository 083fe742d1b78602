package pgtest

import (
	"context"
	"database/sql"
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

func TestDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a, b := NewDatabase(t), NewDatabase(t)
	if a == b {
		t.Fatalf("same DSN twice: %s", a)
	}
	dbA, err := sql.Open("pgx", a)
	if err != nil {
		t.Fatal(err)
	}
	defer dbA.Close()
	if _, err := dbA.ExecContext(ctx, `CREATE TABLE only_in_a (x int)`); err != nil {
		t.Fatalf("create in a: %v", err)
	}
	dbB, err := sql.Open("pgx", b)
	if err != nil {
		t.Fatal(err)
	}
	defer dbB.Close()
	if _, err := dbB.ExecContext(ctx, `SELECT * FROM only_in_a`); err == nil {
		t.Fatal("a table of database a is visible in database b")
	}
}
