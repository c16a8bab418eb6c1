package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// PostgresURLEnv names the variable holding the URL of a PostgreSQL database
// the tests may create databases beside.
const PostgresURLEnv = "LETHE_TEST_POSTGRES_URL"

// Postgres creates a fresh, uniquely named database and returns its URL. The
// name is the base URL's database name + "_t" + a random suffix (so a CI
// run's sweep of "<db>_t%" finds leftovers); it is dropped WITH (FORCE) in
// tb.Cleanup. The base URL comes from LETHE_TEST_POSTGRES_URL, else from a
// PostgreSQL container when Docker answers; else the test is skipped (failed
// under CI=true).
func Postgres(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv(PostgresURLEnv)
	if base == "" {
		base = containerPostgres(tb)
	}
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("testenv: parse %s: %v", PostgresURLEnv, err)
	}
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix == "" {
		prefix = "postgres"
	}
	// PostgreSQL truncates identifiers at 63 bytes; keep the suffix intact.
	if len(prefix) > 63-len("_t")-12 {
		prefix = prefix[:63-len("_t")-12]
	}
	name := prefix + "_t" + randomHex(6)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adminExec(ctx, base, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("testenv: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adminExec(ctx, base, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("testenv: drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// adminExec runs one statement on a fresh connection to dsn.
func adminExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

var container struct {
	once sync.Once
	url  string
	err  error
}

// containerPostgres starts (once per test binary) a PostgreSQL container
// and returns its URL. Testcontainers' reaper removes it when the binary
// exits.
func containerPostgres(tb testing.TB) string {
	tb.Helper()
	container.once.Do(func() {
		container.url, container.err = startContainer()
	})
	if container.err != nil {
		Unavailable(tb, fmt.Sprintf("testenv: PostgreSQL: %s is not set and no Docker engine answers (%v); "+
			"hint: export %s='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'",
			PostgresURLEnv, container.err, PostgresURLEnv))
	}
	return container.url
}

func startContainer() (url string, err error) {
	defer func() {
		// testcontainers panics on some Docker client set-up failures.
		if r := recover(); r != nil {
			err = fmt.Errorf("docker: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	provider, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return "", err
	}
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	err = provider.Health(hctx)
	hcancel()
	if err != nil {
		return "", err
	}
	c, err := tcpostgres.Run(ctx, "postgres:17-alpine",
		tcpostgres.WithDatabase("lethe"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}
