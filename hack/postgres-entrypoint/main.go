// Command postgres-entrypoint is the entrypoint of the PostgreSQL image the
// real-cluster tier builds from Debian's postgresql binaries
// (hack/build-postgres-image.sh), since no registry is reachable. It does
// what the official image's docker-entrypoint.sh does for the variables
// deploy/components/postgres sets: on an empty $PGDATA it runs initdb with
// $POSTGRES_USER as the superuser and $POSTGRES_PASSWORD as its password,
// admits that user from any address with scram-sha-256, and creates
// $POSTGRES_DB; then it runs postgres listening on every address. The image
// has no shell, hence a Go program.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "postgres-entrypoint:", err)
		os.Exit(1)
	}
}

func run() error {
	data := os.Getenv("PGDATA")
	user := os.Getenv("POSTGRES_USER")
	password := os.Getenv("POSTGRES_PASSWORD")
	db := os.Getenv("POSTGRES_DB")
	if data == "" || user == "" || password == "" {
		return errors.New("PGDATA, POSTGRES_USER and POSTGRES_PASSWORD must be set")
	}
	if db == "" {
		db = user
	}
	postgres, err := exec.LookPath("postgres")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := initialize(postgres, data, user, password, db); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return syscall.Exec(postgres, []string{"postgres", "-D", data, "-c", "listen_addresses=*"}, os.Environ())
}

func initialize(postgres, data, user, password, db string) error {
	pwfile, err := os.CreateTemp("", "pwfile")
	if err != nil {
		return err
	}
	defer os.Remove(pwfile.Name())
	if _, err := pwfile.WriteString(password + "\n"); err != nil {
		return err
	}
	if err := pwfile.Close(); err != nil {
		return err
	}
	initdb := exec.Command("initdb", "-D", data, "-U", user, "--pwfile="+pwfile.Name(), "-E", "UTF8", "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256")
	initdb.Stdout, initdb.Stderr = os.Stdout, os.Stderr
	if err := initdb.Run(); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := hba.WriteString("host all all all scram-sha-256\n"); err != nil {
		_ = hba.Close()
		return err
	}
	if err := hba.Close(); err != nil {
		return err
	}
	if db == "postgres" {
		return nil
	}
	// Single-user mode creates the database without a server listening.
	single := exec.Command(postgres, "--single", "-D", data, "postgres")
	single.Stdin = strings.NewReader(fmt.Sprintf("CREATE DATABASE %q OWNER %q\n", db, user))
	single.Stdout, single.Stderr = os.Stdout, os.Stderr
	if err := single.Run(); err != nil {
		return fmt.Errorf("creating database %s: %w", db, err)
	}
	return nil
}
