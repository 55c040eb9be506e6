package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// removePods stops and removes every pod sandbox through containerd's CRI,
// as the kubelet does when a pod goes: containerd kills the containers,
// runs CNI DEL (the address goes back, the veth goes) and unmounts the
// network namespace.
func removePods(socket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping pod %s/%s: %w", sb.Metadata.GetNamespace(), sb.Metadata.GetName(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing pod %s/%s: %w", sb.Metadata.GetNamespace(), sb.Metadata.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// machinePaths are the fixed paths the kubelet and CNI write outside the
// cluster's directory; cleanMachine removes them.
var machinePaths = []string{kubeletDir, "/var/log/pods", "/var/log/containers", "/var/lib/cni"}

// cleanMachine removes what the cluster's processes leave on the machine
// once they are stopped, each step independent of the others so that it
// also clears a crashed run's leftovers: container processes still in the
// kubelet's cgroups, mounts, the bridge, iptables chains, cgroups and files.
// Its errors are reported and not returned: a step with nothing to do fails.
func (c *Cluster) cleanMachine() {
	logf := c.opts.Logf
	killCgroupProcs()
	for _, m := range mountsUnder(append([]string{"/run/netns/cni-", "/var/run/netns/cni-"}, machinePaths...), c.dir) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			logf("cluster cleanup: unmounting %s: %v", m, err)
		}
	}
	for _, args := range [][]string{{"link", "del", bridgeInterface}, {"link", "del", nodeInterface}, {"route", "del", ServiceCIDR}} {
		_ = exec.Command("ip", args...).Run()
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if err := removeChains(ipt); err != nil {
			logf("cluster cleanup: %s: %v", ipt, err)
		}
	}
	removeCgroups()
	for _, p := range append(machinePaths, KubeDir, ContainerdSocket, ContainerdSocket+".ttrpc") {
		if c.preexisting[p] {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			logf("cluster cleanup: %v", err)
		}
	}
	// runc's state and the shims' sockets for the k8s.io namespace; the
	// directories above them are shared with any other containerd (the
	// image test's), so they go only when empty.
	_ = os.RemoveAll("/run/containerd/runc/k8s.io")
	for _, d := range []string{"/run/containerd/runc", "/run/containerd/s", "/run/containerd"} {
		_ = syscall.Rmdir(d)
	}
}

// cgroupRoots are the kubelet's cgroups (cgroupfs driver) in every v1
// hierarchy and the unified one.
func cgroupRoots() []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	return roots
}

// killCgroupProcs kills every process left in the kubelet's cgroups: the
// containers of a run whose containerd died before removing them.
func killCgroupProcs() {
	for _, root := range cgroupRoots() {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// removeCgroups removes the kubelet's cgroup trees, deepest first (a cgroup
// goes only once empty).
func removeCgroups() {
	for _, root := range cgroupRoots() {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		deadline := time.Now().Add(10 * time.Second)
		for _, d := range dirs {
			// A killed process leaves its cgroup a moment after the signal.
			for syscall.Rmdir(d) == syscall.EBUSY && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

// mountsUnder lists the mount points under any of the prefixes, deepest
// first.
func mountsUnder(prefixes []string, dir string) []string {
	if dir != "" {
		prefixes = append(prefixes, dir+"/")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, p := range prefixes {
			if strings.HasPrefix(mp, p) {
				out = append(out, mp)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeChains deletes the chains kube-proxy, the kubelet and the CNI
// plugins made (KUBE-*, CNI-*), and the rules of the built-in chains that
// jump to them, in every table.
func removeChains(ipt string) error {
	var errs []error
	for _, table := range []string{"filter", "nat", "mangle", "raw"} {
		out, err := exec.Command(ipt, "-w", "-t", table, "-S").Output()
		if err != nil {
			continue
		}
		var ours []string
		for _, line := range strings.Split(string(out), "\n") {
			fields := splitRule(line)
			switch {
			case len(fields) == 2 && fields[0] == "-N" && isOurs(fields[1]):
				ours = append(ours, fields[1])
			case len(fields) > 2 && fields[0] == "-A" && !isOurs(fields[1]) && jumpsToOurs(fields):
				args := append([]string{"-w", "-t", table, "-D"}, fields[1:]...)
				if out, err := exec.Command(ipt, args...).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out))
				}
			}
		}
		for _, op := range []string{"-F", "-X"} {
			for _, chain := range ours {
				if out, err := exec.Command(ipt, "-w", "-t", table, op, chain).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s %s %s: %w: %s", ipt, table, op, chain, err, out))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// splitRule splits a line of iptables -S into arguments; a comment with
// spaces is printed in double quotes.
func splitRule(line string) []string {
	var args []string
	var cur strings.Builder
	inQuotes, inArg := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\\' && inQuotes && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case ch == '"':
			inQuotes, inArg = !inQuotes, true
		case ch == ' ' && !inQuotes:
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteByte(ch)
			inArg = true
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args
}

func isOurs(chain string) bool {
	return strings.HasPrefix(chain, "KUBE-") || strings.HasPrefix(chain, "CNI-")
}

func jumpsToOurs(rule []string) bool {
	for i := 0; i+1 < len(rule); i++ {
		if (rule[i] == "-j" || rule[i] == "-g") && isOurs(rule[i+1]) {
			return true
		}
	}
	return false
}
