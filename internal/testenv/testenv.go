// Package testenv gives tests the real servers they run against: a
// PostgreSQL schema of their own, a Redis address, a Redis Cluster started
// from the installed redis-server and shared by the tests of a process
// (RedisCluster), a key prefix of their own on either whose keys are
// deleted when the test ends (RedisPrefix, RedisClusterPrefix), a private
// redis-server a test may kill (StartRedis), the shared NATS server with
// JetStream (NATS) and a private nats-server a test may kill and start
// again (StartNATS).
// A server that is not reachable skips the test with the reason, except when
// CI=true, where it fails it: CI must run every store against a real server.
//
// It is imported by tests only, and must not depend on any Sluice package.
package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// The servers used when the environment names none.
const (
	defaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultRedisURL    = "redis://127.0.0.1:6379/15"
)

// dialTimeout bounds every reachability check, so a missing server costs a
// test seconds, not minutes.
const dialTimeout = 3 * time.Second

// Postgres returns the URL of a PostgreSQL database whose search_path is a
// fresh, empty schema created for this test and dropped, with everything in
// it, when the test ends. The server is SLUICE_TEST_POSTGRES_URL, else
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. application_name
// is the schema name too, so a test can find its own backends in
// pg_stat_activity. Close connections in a cleanup registered after this
// call, so they close before the schema is dropped.
func Postgres(t testing.TB) string {
	t.Helper()
	base := envOr("SLUICE_TEST_POSTGRES_URL", defaultPostgresURL)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("SLUICE_TEST_POSTGRES_URL %q: %v", base, err)
	}
	schema := "sluice_t_" + strings.ToLower(rand.Text()[:16])

	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open postgres %s: %v", u.Redacted(), err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(t.Context(), dialTimeout)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		unreachable(t, "postgres", u.Redacted(), err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() { dropSchema(t, base, schema) })

	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// dropSchema runs on a connection of its own: the test's connections are
// closed by now, and t.Context is already cancelled during cleanup.
func dropSchema(t testing.TB, base, schema string) {
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// Redis returns the URL of a Redis server after checking that it answers
// PING: SLUICE_TEST_REDIS_URL, else redis://127.0.0.1:6379/15. The database
// is shared: a test keeps its keys under a RedisPrefix, which removes them.
func Redis(t testing.TB) string {
	t.Helper()
	raw := envOr("SLUICE_TEST_REDIS_URL", defaultRedisURL)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("SLUICE_TEST_REDIS_URL %q: %v", raw, err)
	}
	if err := ping(t.Context(), u); err != nil {
		unreachable(t, "redis", u.Redacted(), err)
	}
	return raw
}

// ping speaks just enough RESP to authenticate and PING, over TLS for a
// rediss URL.
func ping(ctx context.Context, u *url.URL) error {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "6379")
	}
	var d interface {
		DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	} = &net.Dialer{}
	if u.Scheme == "rediss" {
		d = &tls.Dialer{Config: &tls.Config{ServerName: u.Hostname()}}
	}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	if pass, ok := u.User.Password(); ok {
		if err := command(conn, r, "AUTH", u.User.Username(), pass); err != nil {
			return err
		}
	}
	return command(conn, r, "PING")
}

// command sends one command and fails unless the reply is a simple string.
func command(conn net.Conn, r *bufio.Reader, args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+") {
		return fmt.Errorf("%s: %s", args[0], strings.TrimSpace(line))
	}
	return nil
}

// unreachable skips the test, or fails it under CI.
func unreachable(t testing.TB, server, addr string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not reachable at %s (required because CI=true): %v", server, addr, err)
	} else {
		t.Skipf("%s not reachable at %s: %v", server, addr, err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
