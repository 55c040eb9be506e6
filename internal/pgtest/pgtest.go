// Package pgtest runs a private PostgreSQL cluster for tests: initdb in a
// temporary directory, the server on a unix socket only, fsync off, removed
// when the test ends. PostgreSQL refuses to run as root, so as root it runs
// as the "postgres" user that Debian's package creates.
//
// The binaries come from $POSTGRES_BIN, else the newest
// /usr/lib/postgresql/<version>/bin (Debian: apt-get install postgresql).
// Without them the test is skipped, saying so.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"
)

// BinDir finds the PostgreSQL binaries, or "" when there are none.
func BinDir() string {
	if dir := os.Getenv("POSTGRES_BIN"); dir != "" {
		return dir
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start runs a fresh cluster and returns a DSN for its postgres database.
func Start(t testing.TB) string {
	t.Helper()
	skipWithout(t)
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return start(t, dir)
}

// StartKept runs the cluster kept in dir, made there first if there is
// none, and leaves it there when the test ends: a benchmark's dataset that
// took minutes to fill is filled once.
func StartKept(t testing.TB, dir string) string {
	t.Helper()
	skipWithout(t)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return start(t, dir)
}

func skipWithout(t testing.TB) {
	if BinDir() == "" {
		t.Skip("PostgreSQL binaries not found (apt-get install -y postgresql, or set POSTGRES_BIN): skipping the PostgreSQL history store")
	}
}

// start runs the cluster in dir/data, made by initdb if missing.
func start(t testing.TB, dir string) string {
	t.Helper()
	bin := BinDir()
	cred, err := credential(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
		cmd.Dir = dir
		return cmd
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		if out, err := run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
			t.Fatalf("initdb: %v\n%s", err, out)
		}
	}
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	if cred != nil {
		_ = os.Chown(logPath, int(cred.Uid), int(cred.Gid))
	}
	server := run("postgres", "-D", data, "-k", dir, "-c", "listen_addresses=", "-c", "fsync=off",
		"-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=100")
	server.Stdout, server.Stderr = logFile, logFile
	if err := server.Start(); err != nil {
		t.Fatalf("starting postgres: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = server.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = server.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = server.Process.Kill()
			<-exited
		}
	})
	dsn := fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres sslmode=disable", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("postgres exited")
		default:
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return false, nil
		}
		return true, conn.Close(ctx)
	})
	if err != nil {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("postgres not ready: %v\n%s", err, log)
	}
	return dsn
}

// credential is whom postgres runs as: as root, the postgres user, which
// then owns dir; otherwise the current user.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("postgres refuses to run as root and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
