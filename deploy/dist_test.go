package deploy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// distDir returns make dist's output (ARBITER_DIST), skipping the test
// when it is not set and ARBITER_REQUIRE_DIST is not 1.
func distDir(t *testing.T) string {
	t.Helper()
	dist := os.Getenv("ARBITER_DIST")
	if dist == "" {
		if os.Getenv("ARBITER_REQUIRE_DIST") == "1" {
			t.Fatal("ARBITER_DIST is not set: make dist-check sets it after make dist")
		}
		t.Skip("ARBITER_DIST is not set (make dist-check sets it after make dist)")
	}
	return dist
}

// TestDist_Archives reads what make dist wrote: an archive for linux and
// darwin on amd64 and arm64, each holding a static arbiter for its
// platform, README.md, LICENSE and docs/; a CycloneDX SBOM of each binary
// naming the modules linked in; SHA256SUMS that match every file. The
// binary of this machine's platform prints the stamped version and commit.
func TestDist_Archives(t *testing.T) {
	t.Parallel()
	dist := distDir(t)
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		listed[name] = sum
	}
	version, commit := os.Getenv("VERSION"), os.Getenv("COMMIT")
	for _, platform := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"} {
		archives, _ := filepath.Glob(filepath.Join(dist, "arbiter_*_"+platform+".tar.gz"))
		if len(archives) != 1 {
			t.Errorf("%d archives for %s, want 1", len(archives), platform)
			continue
		}
		archive := archives[0]
		name := strings.TrimSuffix(filepath.Base(archive), ".tar.gz")
		if version != "" && name != "arbiter_"+version+"_"+platform {
			t.Errorf("%s, want arbiter_%s_%s", name, version, platform)
		}
		b, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); listed[filepath.Base(archive)] != hex.EncodeToString(sum[:]) {
			t.Errorf("SHA256SUMS says %q of %s, it is %x", listed[filepath.Base(archive)], filepath.Base(archive), sum)
		}
		files := archiveFiles(t, b)
		for _, want := range []string{name + "/arbiter", name + "/README.md", name + "/LICENSE", name + "/docs/deploy.md"} {
			if _, ok := files[want]; !ok {
				t.Errorf("%s lacks %s", filepath.Base(archive), want)
			}
		}
		if !bytes.Contains(files[name+"/LICENSE"], []byte("Apache License")) {
			t.Errorf("%s: LICENSE is not the Apache License", filepath.Base(archive))
		}
		checkStatic(t, platform, files[name+"/arbiter"])

		sbomName := name + ".cdx.json"
		sbom, err := os.ReadFile(filepath.Join(dist, sbomName))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(sbom); listed[sbomName] != hex.EncodeToString(sum[:]) {
			t.Errorf("SHA256SUMS does not match %s", sbomName)
		}
		var bom struct {
			BOMFormat  string `json:"bomFormat"`
			Components []struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"components"`
		}
		if err := json.Unmarshal(sbom, &bom); err != nil || bom.BOMFormat != "CycloneDX" {
			t.Fatalf("%s is not a CycloneDX document: %v", sbomName, err)
		}
		var modules []string
		for _, c := range bom.Components {
			modules = append(modules, c.Name)
		}
		for _, want := range []string{"modernc.org/sqlite", "github.com/lib/pq", "github.com/go-chi/chi/v5"} {
			if !slices.Contains(modules, want) {
				t.Errorf("%s does not list %s: %v", sbomName, want, modules)
			}
		}

		if platform == runtime.GOOS+"_"+runtime.GOARCH {
			bin := filepath.Join(t.TempDir(), "arbiter")
			os.WriteFile(bin, files[name+"/arbiter"], 0o755)
			out, err := exec.Command(bin, "version").Output()
			if err != nil {
				t.Fatalf("arbiter version: %v", err)
			}
			if version != "" && !strings.HasPrefix(string(out), "arbiter "+version+" ") {
				t.Errorf("arbiter version = %q, want the version %s", out, version)
			}
			if commit != "" && !strings.Contains(string(out), "(commit "+commit+")") {
				t.Errorf("arbiter version = %q, want the commit %s", out, commit)
			}
		}
	}
}

// archiveFiles returns the regular files of a .tar.gz by name.
func archiveFiles(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files[h.Name], _ = io.ReadAll(tr)
		}
	}
}

// checkStatic checks that binary is for platform and, on linux, static:
// no program interpreter, no shared library.
func checkStatic(t *testing.T, platform string, binary []byte) {
	t.Helper()
	goos, goarch, _ := strings.Cut(platform, "_")
	if goos == "darwin" {
		f, err := macho.NewFile(bytes.NewReader(binary))
		if err != nil {
			t.Fatalf("%s: not a Mach-O binary: %v", platform, err)
		}
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]
		if f.Cpu != want {
			t.Errorf("%s: Mach-O for %v", platform, f.Cpu)
		}
		return
	}
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("%s: not an ELF binary: %v", platform, err)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]
	if f.Machine != want {
		t.Errorf("%s: ELF for %v", platform, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: dynamically linked (%v)", platform, p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s: links %v", platform, libs)
	}
}
