package testbed

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const userHZ = 100

// statFields are the fields of a /proc stat file that follow the
// parenthesised command name, which may hold spaces: fields[0] is the state
// (field 3 in proc(5)). ok is false when there is no command name.
func statFields(stat []byte) (fields []string, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(stat[i+1:])), true
}

// CPUTime is the user plus system CPU time a process has used so far
// (/proc/<pid>/stat utime and stime).
func CPUTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	fields, ok := statFields(data)
	if !ok {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// RSS is a process's resident set size in bytes (/proc/<pid>/status VmRSS).
func RSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "123456 kB"
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("/proc/%d/status: unexpected VmRSS %q", pid, line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// waitThreadsStopped waits until every thread of the process is (or, with
// stopped false, none is) in state T, read from /proc/<pid>/task/*/stat.
// Where /proc is not available it returns at once.
func (p *Process) waitThreadsStopped(stopped bool, timeout time.Duration) error {
	cmd, done := p.current()
	if cmd == nil {
		return fmt.Errorf("%s was never started", p.Name)
	}
	taskDir := fmt.Sprintf("/proc/%d/task", cmd.Process.Pid)
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited (%s)", p.Name, p.Exited())
		default:
		}
		tasks, err := os.ReadDir(taskDir)
		if err != nil {
			return nil // no procfs: best effort
		}
		ok := len(tasks) > 0
		for _, task := range tasks {
			stat, err := os.ReadFile(filepath.Join(taskDir, task.Name(), "stat"))
			if err != nil {
				continue // the thread exited
			}
			fields, _ := statFields(stat)
			if len(fields) == 0 {
				continue
			}
			if isStopped := fields[0] == "T" || fields[0] == "t"; isStopped != stopped {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: threads not %s after %v", p.Name, map[bool]string{true: "stopped", false: "running"}[stopped], timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
