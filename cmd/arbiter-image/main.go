// Command arbiter-image builds Arbiter's OCI image without a container
// engine (`make image`): from scratch, the static linux binaries `make dist`
// built, CA certificates, zoneinfo, a non-root user (uid 65532), a volume
// for the SQLite file at /data, OCI labels; one image for linux/amd64 and
// one for linux/arm64 under one index, written as an OCI image layout
// (dist/image) and that layout as a tarball (dist/arbiter_VERSION_oci.tar,
// which `podman load`, `skopeo copy oci-archive:…` and registries' tools
// read). The Dockerfile beside it describes the same image for those who
// build with Docker, from the same files: this program writes them to
// dist/rootfs first, and its tests hold the two to one another.
//
// It is its own Go module, so that go-containerregistry stays out of the
// arbiter binary's dependencies.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "arbiter-image:", err)
		os.Exit(1)
	}
}

// Spec is what one build of the image is made of.
type Spec struct {
	// Dist is make dist's output directory: it holds
	// arbiter_VERSION_linux_ARCH/arbiter for each architecture.
	Dist string
	// Version and Revision are the release's version and commit, as make
	// dist stamped them.
	Version, Revision string
	// Created dates the image and its files (SOURCE_DATE_EPOCH), so that
	// one commit gives one image digest.
	Created time.Time
	// CACertificates is the CA bundle copied to /etc/ssl/certs.
	CACertificates string
	// Zoneinfo is the zip of the time zone database Go ships
	// ($GOROOT/lib/time/zoneinfo.zip), unpacked to /usr/share/zoneinfo.
	Zoneinfo string
}

// Architectures are the image's platforms, all linux.
var Architectures = []string{"amd64", "arm64"}

// The image's fixed parts, which the Dockerfile repeats.
const (
	// UID is the image's user and group: 65532, "nonroot" in distroless.
	UID = 65532
	// DataDir is the volume the SQLite file lives in, the working
	// directory, owned by UID.
	DataDir = "/data"
	// BinaryPath is where the arbiter binary is; PATH holds its directory.
	BinaryPath = "/usr/local/bin/arbiter"
	// Source is the repository the image is built from.
	Source = "https://github.com/arbiterhq/arbiter"
	// License is the SPDX identifier of the licence (LICENSE).
	License = "Apache-2.0"
)

// Config returns the image's runtime configuration: user, entrypoint,
// command, environment, port, volume, working directory and OCI labels.
func Config(s Spec) v1.Config {
	return v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, UID),
		Entrypoint: []string{"arbiter"},
		Cmd:        []string{"serve"},
		Env: []string{
			"PATH=/usr/local/bin",
			"ARBITER_ADDR=:8080",
			"ARBITER_DATABASE_URL=sqlite:" + DataDir + "/arbiter.db",
		},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
		Volumes:      map[string]struct{}{DataDir: {}},
		WorkingDir:   DataDir,
		Labels: map[string]string{
			"org.opencontainers.image.title":       "Arbiter",
			"org.opencontainers.image.description": "A verification task service: an automated verifier answers first, a person decides below its threshold.",
			"org.opencontainers.image.source":      Source,
			"org.opencontainers.image.url":         Source,
			"org.opencontainers.image.version":     s.Version,
			"org.opencontainers.image.revision":    s.Revision,
			"org.opencontainers.image.licenses":    License,
			"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
		},
	}
}

// run builds the image from the flags and the environment.
func run(args []string, getenv func(string) string, stdout io.Writer) error {
	fset := flag.NewFlagSet("arbiter-image", flag.ContinueOnError)
	dist := fset.String("dist", "dist", "make dist's output directory; the image is written into it")
	version := fset.String("version", getenv("VERSION"), "the release's version (default $VERSION, else the one dist/ was built with)")
	revision := fset.String("revision", getenv("COMMIT"), "the release's commit (default $COMMIT)")
	certs := fset.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to include")
	if err := fset.Parse(args); err != nil {
		return err
	}
	s := Spec{Dist: *dist, Version: *version, Revision: *revision, CACertificates: *certs,
		Zoneinfo: filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip"), Created: time.Unix(0, 0).UTC()}
	if epoch := getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		n, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH must be seconds since 1970, not %q", epoch)
		}
		s.Created = time.Unix(n, 0).UTC()
	}
	if s.Version == "" {
		v, err := distVersion(s.Dist)
		if err != nil {
			return err
		}
		s.Version = v
	}
	index, err := Build(s)
	if err != nil {
		return err
	}
	layoutDir := filepath.Join(s.Dist, "image")
	if err := WriteLayout(layoutDir, index, s.Version); err != nil {
		return err
	}
	archive := filepath.Join(s.Dist, "arbiter_"+s.Version+"_oci.tar")
	if err := tarDir(archive, layoutDir, s.Created); err != nil {
		return err
	}
	digest, err := index.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "arbiter-image: %s (linux/%s) in %s and %s\n", digest, strings.Join(Architectures, ", linux/"), layoutDir, archive)
	return nil
}

// distVersion returns the version of the one linux/amd64 build in dist.
func distVersion(dist string) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(dist, "arbiter_*_linux_amd64"))
	var dirs []string
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			dirs = append(dirs, m)
		}
	}
	if len(dirs) != 1 {
		return "", fmt.Errorf("found %d linux/amd64 builds in %s, want one: run make dist, or name -version", len(dirs), dist)
	}
	name := filepath.Base(dirs[0])
	return strings.TrimSuffix(strings.TrimPrefix(name, "arbiter_"), "_linux_amd64"), nil
}

// Build writes the files every platform shares to Dist/rootfs (what the
// Dockerfile copies) and returns the image index: one image a platform,
// each the shared layer and its binary's.
func Build(s Spec) (v1.ImageIndex, error) {
	rootfs := filepath.Join(s.Dist, "rootfs")
	if err := writeRootfs(rootfs, s); err != nil {
		return nil, err
	}
	base, err := layerOf(func(w *tar.Writer) error { return addTree(w, rootfs, s.Created) })
	if err != nil {
		return nil, err
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range Architectures {
		binary := filepath.Join(s.Dist, "arbiter_"+s.Version+"_linux_"+arch, "arbiter")
		b, err := os.ReadFile(binary)
		if err != nil {
			return nil, fmt.Errorf("the linux/%s binary (run make dist): %w", arch, err)
		}
		app, err := layerOf(func(w *tar.Writer) error {
			for _, dir := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
				if err := w.WriteHeader(dirHeader(dir, 0, s.Created)); err != nil {
					return err
				}
			}
			return addFile(w, strings.TrimPrefix(BinaryPath, "/"), 0o755, 0, b, s.Created)
		})
		if err != nil {
			return nil, err
		}
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		if img, err = mutate.AppendLayers(img, base, app); err != nil {
			return nil, err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cfg = cfg.DeepCopy()
		cfg.OS, cfg.Architecture = "linux", arch
		cfg.Created = v1.Time{Time: s.Created}
		cfg.Config = Config(s)
		cfg.History = []v1.History{
			{Created: v1.Time{Time: s.Created}, CreatedBy: "arbiter-image: CA certificates, zoneinfo, /etc/passwd, " + DataDir, Comment: "dist/rootfs"},
			{Created: v1.Time{Time: s.Created}, CreatedBy: "arbiter-image: " + BinaryPath, Comment: "make dist's linux/" + arch + " build"},
		}
		if img, err = mutate.ConfigFile(img, cfg); err != nil {
			return nil, err
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return index, nil
}

// WriteLayout writes index as an OCI image layout at dir, named version
// (org.opencontainers.image.ref.name), replacing what dir held.
func WriteLayout(dir string, index v1.ImageIndex, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(index, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version}))
}

// writeRootfs writes the files every platform's image shares: the CA
// bundle, the time zone database, /etc/passwd and /etc/group naming the
// user, and the data directory.
func writeRootfs(rootfs string, s Spec) error {
	if err := os.RemoveAll(rootfs); err != nil {
		return err
	}
	certs, err := os.ReadFile(s.CACertificates)
	if err != nil {
		return fmt.Errorf("CA certificates (Debian's ca-certificates): %w", err)
	}
	files := map[string][]byte{
		"etc/ssl/certs/ca-certificates.crt": certs,
		"etc/passwd":                        fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", UID, UID, DataDir),
		"etc/group":                         fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", UID),
	}
	zones, err := zip.OpenReader(s.Zoneinfo)
	if err != nil {
		return fmt.Errorf("Go's zoneinfo.zip: %w", err)
	}
	defer zones.Close()
	for _, f := range zones.File {
		if f.FileInfo().IsDir() {
			continue
		}
		r, err := f.Open()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return err
		}
		files["usr/share/zoneinfo/"+f.Name] = b
	}
	for name, b := range files {
		p := filepath.Join(rootfs, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(rootfs, strings.TrimPrefix(DataDir, "/")), 0o755)
}

// layerOf returns the gzipped OCI layer of the tar write writes.
func layerOf(write func(*tar.Writer) error) (v1.Layer, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	if err := write(w); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// addTree writes the tree at root into w, in name order, owned by root
// except the data directory, which is UID's; every file dated at.
func addTree(w *tar.Writer, root string, at time.Time) error {
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, p := range names {
		rel, _ := filepath.Rel(root, p)
		name := filepath.ToSlash(rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			owner := 0
			if "/"+name == DataDir {
				owner = UID
			}
			if err := w.WriteHeader(dirHeader(name+"/", owner, at)); err != nil {
				return err
			}
			continue
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: only directories and regular files go into the image", p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := addFile(w, name, 0o644, 0, b, at); err != nil {
			return err
		}
	}
	return nil
}

// dirHeader is the header of a directory owned by owner.
func dirHeader(name string, owner int, at time.Time) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, Uid: owner, Gid: owner, ModTime: at, Format: tar.FormatPAX}
}

// addFile writes one regular file owned by owner.
func addFile(w *tar.Writer, name string, mode int64, owner int, b []byte, at time.Time) error {
	if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Uid: owner, Gid: owner,
		Size: int64(len(b)), ModTime: at, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// tarDir writes the tree at dir as an uncompressed tarball at file, its
// paths relative to dir: an OCI layout so packed is an "oci-archive".
func tarDir(file, dir string, at time.Time) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := tar.NewWriter(f)
	if err := addTree(w, dir, at); err != nil {
		return err
	}
	return w.Close()
}

// errNoImage is returned by readers of a layout that holds no image.
var errNoImage = errors.New("the layout holds no image index")

// ReadIndex returns the image index of the layout at dir, as WriteLayout
// wrote it.
func ReadIndex(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, errNoImage
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}
