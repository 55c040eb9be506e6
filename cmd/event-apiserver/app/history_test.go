package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHistoryDSNFile: the DSN read from --history-dsn-file reaches the
// store as --history-dsn would, without its trailing newline, and every
// way the file can be wrong stops the start with an error that names it.
func TestHistoryDSNFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const dsn = "postgres://history:s3cret@db.example:5432/history?sslmode=verify-full"
	withNewline := write("dsn", dsn+"\n")
	withCRLF := write("dsn-crlf", dsn+"\r\n")
	empty := write("empty", "")
	blank := write("blank", "\n")
	cases := []struct {
		name    string
		args    []string
		wantDSN string
		wantErr string
	}{
		{name: "file, trailing newline trimmed", args: []string{"--history-store=postgres", "--history-dsn-file=" + withNewline}, wantDSN: dsn},
		{name: "file written on Windows", args: []string{"--history-store=postgres", "--history-dsn-file=" + withCRLF}, wantDSN: dsn},
		{name: "deprecated flag still works", args: []string{"--history-store=postgres", "--history-dsn=" + dsn}, wantDSN: dsn},
		{name: "both", args: []string{"--history-store=postgres", "--history-dsn=" + dsn, "--history-dsn-file=" + withNewline},
			wantErr: "--history-dsn and --history-dsn-file are two sources"},
		{name: "missing file", args: []string{"--history-store=postgres", "--history-dsn-file=" + filepath.Join(dir, "absent")},
			wantErr: "--history-dsn-file: open " + filepath.Join(dir, "absent")},
		{name: "empty file", args: []string{"--history-store=postgres", "--history-dsn-file=" + empty}, wantErr: "--history-dsn-file " + empty + " is empty"},
		{name: "only a newline", args: []string{"--history-store=postgres", "--history-dsn-file=" + blank}, wantErr: "is empty"},
		{name: "a directory", args: []string{"--history-store=postgres", "--history-dsn-file=" + dir}, wantErr: "--history-dsn-file: read " + dir},
		{name: "neither, postgres", args: []string{"--history-store=postgres"}, wantErr: "--history-store=postgres needs --history-dsn-file"},
		{name: "a fleet on SQLite", args: []string{"--history-fleet-namespace=fleet"}, wantErr: "--history-fleet-namespace needs --history-store=postgres"},
		{name: "a fleet on PostgreSQL", args: []string{"--history-store=postgres", "--history-dsn=" + dsn, "--history-fleet-namespace=fleet"}, wantDSN: dsn},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(t, append([]string{"--history-only"}, tc.args...)...)
			if err == nil {
				err = c.Validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.History.DSN != tc.wantDSN {
				t.Errorf("DSN %q, want %q", c.History.DSN, tc.wantDSN)
			}
		})
	}
}
