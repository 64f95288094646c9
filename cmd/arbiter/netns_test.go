package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/arbiterhq/arbiter/db/dbtest"
)

// hostNetwork is where the three-host test runs its replicas: each in a
// network namespace of its own, joined to this one by a veth pair with
// the addresses of a private /24 of its own, or, where namespaces are
// refused (not root, no CAP_NET_ADMIN, no ip command), on loopback
// addresses of this namespace.
type hostNetwork struct {
	// ips are the replicas' addresses, which this namespace reaches.
	ips []string
	// trusted is the replicas' ARBITER_TRUSTED_PROXIES: the addresses
	// the balancer and this test reach them from.
	trusted string
	// hostIP is this namespace's address at which the replicas reach the
	// test's own servers (reach); "" on loopback, where they reach them
	// where they listen.
	hostIP string
	// namespaces are the replicas' network namespaces ("" on loopback).
	namespaces []string
}

// netnsPrefix begins the name of every namespace hostNetwork makes, which
// goes on with the test process's id: leftovers of a run that was killed
// are found by it.
const netnsPrefix = "arbiter-hosts-"

// newHostNetwork returns the network of n replicas: n network namespaces,
// deleted when the test ends, or n loopback addresses where `ip netns add`
// is refused. It logs which.
func newHostNetwork(t *testing.T, n int) *hostNetwork {
	t.Helper()
	loopback := &hostNetwork{trusted: "127.0.0.0/8", namespaces: make([]string, n)}
	for i := range n {
		loopback.ips = append(loopback.ips, fmt.Sprintf("127.0.0.%d", i+2))
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Logf("the replicas run on loopback addresses: no ip command (%v)", err)
		return loopback
	}
	removeLeftoverNamespaces(t)
	tag := fmt.Sprintf("%06x", rand.IntN(1<<24))
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s%d-%s-%d", netnsPrefix, os.Getpid(), tag, i+1)
	}
	if out, err := exec.Command("ip", "netns", "add", names[0]).CombinedOutput(); err != nil {
		t.Logf("the replicas run on loopback addresses: network namespaces are refused (ip netns add: %v: %s)", err, strings.TrimSpace(string(out)))
		return loopback
	}
	t.Cleanup(func() { deleteNamespace(t, names[0]) })
	// Two runs at once must not take the same subnet: the choice and its
	// addresses are made under a lock.
	unlock := lockFile(t, filepath.Join(os.TempDir(), "arbiter-hosts-net.lock"))
	defer unlock()
	subnet := freeSubnet(t)
	hn := &hostNetwork{trusted: fmt.Sprintf("10.%d.0.0/16", subnet),
		hostIP: fmt.Sprintf("10.%d.1.1", subnet), namespaces: names}
	for i, ns := range names {
		if i > 0 {
			ipOK(t, "netns", "add", ns)
			t.Cleanup(func() { deleteNamespace(t, ns) })
		}
		// Each replica's own /24: 10.S.i.1 here, 10.S.i.2 in its
		// namespace, whose default route leads here, so that it reaches
		// hostIP too.
		outer, inner := fmt.Sprintf("arb%s%dh", tag, i+1), fmt.Sprintf("arb%s%dn", tag, i+1)
		here, there := fmt.Sprintf("10.%d.%d.1", subnet, i+1), fmt.Sprintf("10.%d.%d.2", subnet, i+1)
		ipOK(t, "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns)
		ipOK(t, "addr", "add", here+"/24", "dev", outer)
		ipOK(t, "link", "set", outer, "up")
		ipOK(t, "-n", ns, "link", "set", "lo", "up")
		ipOK(t, "-n", ns, "addr", "add", there+"/24", "dev", inner)
		ipOK(t, "-n", ns, "link", "set", inner, "up")
		ipOK(t, "-n", ns, "route", "add", "default", "via", here)
		hn.ips = append(hn.ips, there)
	}
	t.Logf("the replicas run in network namespaces %s, at %s", strings.Join(names, ", "), strings.Join(hn.ips, ", "))
	return hn
}

// command returns the command that runs name with args as replica i: in
// its namespace (ip netns exec, which executes it in its own place, so
// that a signal to the command is a signal to the replica), or here.
func (hn *hostNetwork) command(i int, name string, args ...string) *exec.Cmd {
	if hn.namespaces[i] == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", hn.namespaces[i], name}, args...)...)
}

// reach returns the URL at which the replicas reach the server of rawURL,
// which listens on loopback here: through a proxy at hostIP, closed when
// the test ends, or rawURL itself when the replicas share this namespace.
func (hn *hostNetwork) reach(t *testing.T, rawURL string) string {
	t.Helper()
	if hn.hostIP == "" {
		return rawURL
	}
	_, reached := dbtest.ThroughProxyAt(t, hn.hostIP, rawURL)
	return reached
}

// ipOK runs `ip args…` and fails the test with its output when it fails.
func ipOK(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// deleteNamespace deletes the namespace ns, and with it its end of the
// veth pair, which takes the other end along.
func deleteNamespace(t *testing.T, ns string) {
	if out, err := exec.Command("ip", "netns", "delete", ns).CombinedOutput(); err != nil {
		t.Errorf("ip netns delete %s: %v: %s", ns, err, out)
	}
}

// removeLeftoverNamespaces deletes the namespaces an earlier run left when
// it was killed before its cleanups: those named by netnsPrefix whose
// process is gone. A namespace whose processes still run stays until they
// end, and so does its subnet (freeSubnet passes it by).
func removeLeftoverNamespaces(t *testing.T) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], netnsPrefix) {
			continue
		}
		name := fields[0]
		pidText, _, _ := strings.Cut(strings.TrimPrefix(name, netnsPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if err := exec.Command("ip", "netns", "delete", name).Run(); err == nil {
			t.Logf("deleted the namespace %s, left by a run that was killed", name)
		}
	}
}

// freeSubnet returns S of a 10.S.0.0/16 no address or route of this
// namespace is in (S from 200 to 254), or fails the test.
func freeSubnet(t *testing.T) int {
	t.Helper()
	addrs, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		t.Fatalf("ip addr show: %v", err)
	}
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		t.Fatalf("ip route show: %v", err)
	}
	taken := string(addrs) + string(routes)
	start := os.Getpid() % 55
	for k := range 55 {
		s := 200 + (start+k)%55
		if !strings.Contains(taken, fmt.Sprintf(" 10.%d.", s)) && !strings.Contains(taken, fmt.Sprintf("\n10.%d.", s)) &&
			!strings.HasPrefix(taken, fmt.Sprintf("10.%d.", s)) {
			return s
		}
	}
	t.Fatal("no free 10.S.0.0/16 for the replicas' network (S from 200 to 254)")
	return 0
}

// lockFile takes an exclusive lock on the file at path, made if missing,
// and returns its release.
func lockFile(t *testing.T, path string) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}
