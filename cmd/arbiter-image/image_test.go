package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// distDir returns make dist's output directory (ARBITER_DIST), skipping
// the test when it is not set and ARBITER_REQUIRE_IMAGE is not 1.
func distDir(t *testing.T) string {
	t.Helper()
	dist := os.Getenv("ARBITER_DIST")
	if dist == "" {
		if os.Getenv("ARBITER_REQUIRE_IMAGE") == "1" {
			t.Fatal("ARBITER_DIST is not set: run make dist, then make image-check")
		}
		t.Skip("ARBITER_DIST is not set (make image-check sets it after make dist)")
	}
	abs, err := filepath.Abs(dist)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// buildImage runs the builder as make image does, on a copy of dist's
// linux builds, and returns the version and the index read back from the
// layout it wrote.
func buildImage(t *testing.T) (string, string, v1.ImageIndex) {
	t.Helper()
	dist := distDir(t)
	version, err := distVersion(dist)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, arch := range Architectures {
		name := "arbiter_" + version + "_linux_" + arch
		b, err := os.ReadFile(filepath.Join(dist, name, "arbiter"))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(out, name), 0o755)
		if err := os.WriteFile(filepath.Join(out, name, "arbiter"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var stdout bytes.Buffer
	env := map[string]string{"COMMIT": "0123456789abcdef0123456789abcdef01234567", "SOURCE_DATE_EPOCH": "1767225600"}
	if err := run([]string{"-dist", out}, func(k string) string { return env[k] }, &stdout); err != nil {
		t.Fatal(err)
	}
	index, err := ReadIndex(filepath.Join(out, "image"))
	if err != nil {
		t.Fatalf("read the layout back: %v", err)
	}
	return version, out, index
}

// TestImage_ConfigReadBack builds the image and reads it back from the
// OCI layout: an index of linux/amd64 and linux/arm64, each run as uid
// 65532 with ENTRYPOINT ["arbiter"], CMD ["serve"], port 8080, the volume
// /data and the OCI labels; the tarball holds the same layout.
func TestImage_ConfigReadBack(t *testing.T) {
	version, out, index := buildImage(t)
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Config
		if cfg.OS != d.Platform.OS || cfg.Architecture != d.Platform.Architecture {
			t.Errorf("%s: the config says %s/%s", platforms[len(platforms)-1], cfg.OS, cfg.Architecture)
		}
		if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"arbiter"}) || !slices.Equal(c.Cmd, []string{"serve"}) {
			t.Errorf("user %q entrypoint %q cmd %q", c.User, c.Entrypoint, c.Cmd)
		}
		if _, ok := c.ExposedPorts["8080/tcp"]; !ok || len(c.Volumes) != 1 || c.WorkingDir != "/data" {
			t.Errorf("ports %v volumes %v workdir %q", c.ExposedPorts, c.Volumes, c.WorkingDir)
		}
		if _, ok := c.Volumes["/data"]; !ok {
			t.Errorf("volumes %v, want /data", c.Volumes)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
			"org.opencontainers.image.source":   "https://github.com/arbiterhq/arbiter",
			"org.opencontainers.image.created":  "2026-01-01T00:00:00Z",
		} {
			if c.Labels[k] != want {
				t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
			}
		}
		size := int64(0)
		layers, _ := img.Layers()
		for _, l := range layers {
			n, _ := l.Size()
			size += n
		}
		t.Logf("%s/%s: %d layers, %.1f MB compressed", cfg.OS, cfg.Architecture, len(layers), float64(size)/1e6)
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
	// The tarball is the layout: its index.json is the layout's.
	archive, err := os.Open(filepath.Join(out, "arbiter_"+version+"_oci.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer archive.Close()
	layoutIndex, _ := os.ReadFile(filepath.Join(out, "image", "index.json"))
	if got := tarEntry(t, archive, "index.json"); !bytes.Equal(got, layoutIndex) || len(got) == 0 {
		t.Errorf("the tarball's index.json differs from the layout's")
	}
}

// TestImage_Reproducible builds twice from the same files and date: the
// same index digest.
func TestImage_Reproducible(t *testing.T) {
	_, _, a := buildImage(t)
	_, _, b := buildImage(t)
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two builds of the same files: %s and %s", da, db)
	}
}

// TestImage_ServesFromItsRootfs unpacks the linux/amd64 image's root
// filesystem and runs its entrypoint and command as its user, in a chroot
// of new mount and PID namespaces (as root; a container engine does no
// less), against SQLite in the volume: /healthz answers 200, a key made by
// the image's own binary creates a task, the SQLite file is in /data owned
// by uid 65532, and SIGTERM to it, PID 1 there, stops it cleanly.
func TestImage_ServesFromItsRootfs(t *testing.T) {
	if os.Geteuid() != 0 || exec.Command("unshare", "--mount", "--pid", "--fork", "true").Run() != nil {
		if os.Getenv("ARBITER_REQUIRE_IMAGE") == "1" {
			t.Fatal("running the image's root filesystem needs root and unshare")
		}
		t.Skip("running the image's root filesystem needs root and unshare")
	}
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		t.Fatal(err)
	}
	_, _, index := buildImage(t)
	img, err := index.Image(platformDigest(t, index, "amd64"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	rootfs := t.TempDir()
	if err := untar(mutate.Extract(img), rootfs); err != nil {
		t.Fatalf("unpack the root filesystem: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "data")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65532 {
		t.Fatalf("/data in the image: %v, want a directory owned by 65532", err)
	}
	// As a container engine starts it: the config's user, working
	// directory, environment, entrypoint and command; the listen address
	// moved to a free loopback port.
	inImage := func(args ...string) *exec.Cmd {
		c := exec.Command("unshare", append([]string{"--mount", "--pid", "--fork", chroot, "--userspec=" + cfg.Config.User, rootfs}, args...)...)
		c.Env = append(slices.Clone(cfg.Config.Env), "ARBITER_ADDR=127.0.0.1:0", "PATH=/usr/local/bin:/usr/sbin:/usr/bin")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return c
	}
	serve := inImage(append(slices.Clone(cfg.Config.Entrypoint), cfg.Config.Cmd...)...)
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			syscall.Kill(-serve.Process.Pid, syscall.SIGKILL)
			serve.Wait()
		}
	})
	logs := &lockedBuffer{}
	listening := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`msg=listening addr=(\S+)`)
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			logs.WriteLine(s.Text())
			if m := re.FindStringSubmatch(s.Text()); m != nil {
				listening <- m[1]
			}
		}
		close(listening)
	}()
	addr, ok := <-listening
	if !ok {
		t.Fatalf("arbiter serve in the image stopped:\n%s", logs)
	}
	base := "http://" + addr

	// /healthz is 200 once the in-process worker has beaten.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz never answered 200: %v\n%s", err, logs)
		}
	}
	keyOut, err := inImage("arbiter", "admin", "create-key", "--email", "ops@example.com").Output()
	if err != nil {
		t.Fatalf("arbiter admin create-key in the image: %v", err)
	}
	key := strings.TrimSpace(string(keyOut))
	req, _ := http.NewRequest("POST", base+"/v1/tasks", strings.NewReader(`{"prompt":"Refund order 1?","allowed_verdicts":["approve","reject"]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var task map[string]any
	json.NewDecoder(res.Body).Decode(&task)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || task["status"] == nil {
		t.Fatalf("create = %d %v", res.StatusCode, task)
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "data", "arbiter.db")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65532 {
		t.Errorf("the SQLite file in the volume: %v, want one owned by 65532", err)
	}

	// SIGTERM to the process group: arbiter, PID 1 of its namespace,
	// shuts down gracefully.
	syscall.Kill(-serve.Process.Pid, syscall.SIGTERM)
	waited := make(chan error, 1)
	go func() { waited <- serve.Wait() }()
	select {
	case err := <-waited:
		stopped = true
		if err != nil {
			t.Errorf("arbiter serve in the image exited with %v\n%s", err, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("arbiter serve in the image did not stop within 30s of SIGTERM\n%s", logs)
	}
}

// TestDockerfile_DescribesTheSameImage reads the Dockerfile beside the
// builder: from scratch, the files the builder writes and make dist's
// binary copied to the same places, and the same user, environment,
// working directory, volume, port, labels, entrypoint and command as
// Config.
func TestDockerfile_DescribesTheSameImage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Version: "${VERSION}", Revision: "${REVISION}"}
	want := Config(spec)
	want.Labels["org.opencontainers.image.created"] = "${CREATED}"
	var got v1.Config
	got.Labels = map[string]string{}
	got.ExposedPorts, got.Volumes = map[string]struct{}{}, map[string]struct{}{}
	var from string
	var copies []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instruction, rest, _ := strings.Cut(line, " ")
		switch instruction {
		case "FROM":
			from = rest
		case "ARG":
		case "COPY":
			copies = append(copies, rest)
		case "ENV":
			got.Env = append(got.Env, rest)
		case "USER":
			got.User = rest
		case "WORKDIR":
			got.WorkingDir = rest
		case "VOLUME":
			got.Volumes[rest] = struct{}{}
		case "EXPOSE":
			got.ExposedPorts[rest] = struct{}{}
		case "LABEL":
			k, v, _ := strings.Cut(rest, "=")
			got.Labels[k] = strings.Trim(v, `"`)
		case "ENTRYPOINT":
			json.Unmarshal([]byte(rest), &got.Entrypoint)
		case "CMD":
			json.Unmarshal([]byte(rest), &got.Cmd)
		default:
			t.Errorf("the Dockerfile's %s has no counterpart in the builder", instruction)
		}
	}
	if from != "scratch" {
		t.Errorf("FROM %s, want scratch", from)
	}
	wantCopies := []string{"dist/rootfs/ /", "--chown=65532:65532 dist/rootfs" + DataDir + " " + DataDir,
		"dist/arbiter_${VERSION}_linux_${TARGETARCH}/arbiter " + BinaryPath}
	if !slices.Equal(copies, wantCopies) {
		t.Errorf("COPY %q, want %q", copies, wantCopies)
	}
	for _, diff := range [][3]any{
		{"ENV", got.Env, want.Env}, {"USER", got.User, want.User}, {"WORKDIR", got.WorkingDir, want.WorkingDir},
		{"VOLUME", got.Volumes, want.Volumes}, {"EXPOSE", got.ExposedPorts, want.ExposedPorts}, {"LABEL", got.Labels, want.Labels},
		{"ENTRYPOINT", got.Entrypoint, want.Entrypoint}, {"CMD", got.Cmd, want.Cmd},
	} {
		if fmt.Sprint(diff[1]) != fmt.Sprint(diff[2]) {
			t.Errorf("%s: the Dockerfile says %v, the builder %v", diff[0], diff[1], diff[2])
		}
	}
}

// platformDigest returns the digest of the index's image for linux/arch.
func platformDigest(t *testing.T, index v1.ImageIndex, arch string) v1.Hash {
	t.Helper()
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Architecture == arch {
			return d.Digest
		}
	}
	t.Fatalf("no linux/%s image in the index", arch)
	return v1.Hash{}
}

// tarEntry returns the content of the tarball's entry name.
func tarEntry(t *testing.T, r io.Reader, name string) []byte {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the tarball: %v", name, err)
		}
		if h.Name == name {
			b, _ := io.ReadAll(tr)
			return b
		}
	}
}

// untar unpacks a flattened root filesystem into dir, with its owners and
// modes, as a container engine does.
func untar(rc io.ReadCloser, dir string) error {
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return fmt.Errorf("%s leaves the root", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, os.FileMode(h.Mode)&os.ModePerm); err != nil {
				return err
			}
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(p), 0o755)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&os.ModePerm)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			f.Close()
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
		if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
			return err
		}
	}
}

// lockedBuffer collects a process's log lines for a failure message.
type lockedBuffer struct {
	mu    sync.Mutex
	lines []string
}

// WriteLine appends one line.
func (b *lockedBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, s)
}

// String returns the lines so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}
