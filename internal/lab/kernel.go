package lab

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ulikunitz/xz"
	"golang.org/x/sys/unix"
)

// Kernel is Debian's kernel package, unpacked in the cache.
type Kernel struct {
	// Package is the Debian package ("linux-image-6.1.0-56-amd64").
	Package string
	// Release is the kernel release ("6.1.0-56-amd64").
	Release string
	// Vmlinuz is the kernel image; ModDir is lib/modules/RELEASE.
	Vmlinuz, ModDir string
}

// DefaultCache is where the kernel package is kept between runs
// (IRQPILOT_LAB_CACHE overrides it).
func DefaultCache() string {
	if d := os.Getenv("IRQPILOT_LAB_CACHE"); d != "" {
		return d
	}
	return "/var/cache/irqpilot/lab"
}

// Kernels are the Debian releases whose kernel the lab boots, by the
// kernel's version (--kernel): each is that release's linux-image-amd64.
// DefaultKernel is the host's own release's, fetched with the host's apt;
// the others are fetched with an apt configuration private to the cache
// (its own sources list, package lists and status), so the machine's apt
// sources are never changed. To add one, add its version and release here.
var Kernels = map[string]string{
	"5.10": "bullseye",
	"6.1":  "bookworm",
	"6.12": "trixie",
}

// DefaultKernel is the kernel the lab boots unless told otherwise.
const DefaultKernel = "6.1"

// KernelVersions lists Kernels' versions, sorted.
func KernelVersions() []string {
	var out []string
	for v := range Kernels {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// privateApt makes (once) an apt configuration below cache for suite and
// returns the options that make apt-get and apt-cache use it.
func privateApt(cache, suite string) ([]string, error) {
	root := filepath.Join(cache, "apt-"+suite)
	for _, d := range []string{"lists/partial", "cache/archives/partial", "parts", "state"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	src := "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian " + suite + " main\n"
	if err := os.WriteFile(filepath.Join(root, "sources.list"), []byte(src), 0o644); err != nil {
		return nil, err
	}
	status := filepath.Join(root, "status")
	if _, err := os.Stat(status); err != nil {
		if err := os.WriteFile(status, nil, 0o644); err != nil {
			return nil, err
		}
	}
	return []string{
		"-o", "Dir::Etc::SourceList=" + filepath.Join(root, "sources.list"),
		"-o", "Dir::Etc::SourceParts=" + filepath.Join(root, "parts"),
		"-o", "Dir::State=" + filepath.Join(root, "state"),
		"-o", "Dir::State::Lists=" + filepath.Join(root, "lists"),
		"-o", "Dir::State::status=" + status,
		"-o", "Dir::Cache=" + filepath.Join(root, "cache"),
	}, nil
}

var reDepends = regexp.MustCompile(`(?m)^\s*Depends:\s*(linux-image-[0-9][^\s]*-amd64)\s*$`)

// PrepareKernel returns Debian's current amd64 kernel, unpacked below
// cache; the first call fetches the package with apt (`apt-get download`
// of what linux-image-amd64 depends on) and unpacks it with dpkg-deb.
// Nothing is installed on the host. Runs of several processes share the
// cache under a lock.
func PrepareKernel(cache string, log io.Writer) (*Kernel, error) {
	return PrepareKernelVersion(cache, DefaultKernel, log)
}

// PrepareKernelVersion is PrepareKernel for the kernel of Kernels[version],
// cached by its package's name.
func PrepareKernelVersion(cache, version string, log io.Writer) (*Kernel, error) {
	suite, ok := Kernels[version]
	if !ok {
		return nil, fmt.Errorf("no lab kernel %q (known: %s)", version, strings.Join(KernelVersions(), ", "))
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(filepath.Join(cache, "lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		return nil, err
	}
	var apt []string // the host's apt for the default kernel
	if version != DefaultKernel {
		if apt, err = privateApt(cache, suite); err != nil {
			return nil, err
		}
	}
	pkg, err := kernelPackage(apt, log)
	if err != nil {
		return nil, err
	}
	want := "linux-image-" + version + "."
	if !strings.HasPrefix(pkg, want) && apt == nil {
		// The host runs another release than the default kernel's: ask
		// that release's own apt, as for the other kernels.
		if apt, err = privateApt(cache, suite); err != nil {
			return nil, err
		}
		if pkg, err = kernelPackage(apt, log); err != nil {
			return nil, err
		}
	}
	if !strings.HasPrefix(pkg, want) {
		return nil, fmt.Errorf("lab kernel %s: %s's linux-image-amd64 is %s, not a %s kernel", version, suite, pkg, version)
	}
	dir := filepath.Join(cache, pkg)
	k, err := readKernel(pkg, dir)
	if err == nil {
		return k, nil
	}
	fmt.Fprintf(log, "lab: fetching %s (Debian's kernel package) into %s\n", pkg, cache)
	dl := exec.Command("apt-get", append(append([]string{}, apt...), "download", pkg)...)
	dl.Dir = cache
	if _, err := dl.CombinedOutput(); err != nil {
		// Package lists kept from an earlier run may name a package
		// the mirror has since dropped: refresh them and ask again.
		fmt.Fprintln(log, "lab: download failed; refreshing the package lists")
		if out, err := exec.Command("apt-get", append(append([]string{}, apt...), "update", "-qq")...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("apt-get update: %v\n%s", err, out)
		}
		if pkg, err = kernelPackage(apt, log); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(pkg, want) {
			return nil, fmt.Errorf("lab kernel %s: %s's linux-image-amd64 is %s, not a %s kernel", version, suite, pkg, version)
		}
		dir = filepath.Join(cache, pkg)
		if k, err := readKernel(pkg, dir); err == nil {
			return k, nil
		}
		dl = exec.Command("apt-get", append(append([]string{}, apt...), "download", pkg)...)
		dl.Dir = cache
		if out, err := dl.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("apt-get download %s: %v\n%s", pkg, err, out)
		}
	}
	debs, _ := filepath.Glob(filepath.Join(cache, pkg+"_*.deb"))
	if len(debs) == 0 {
		return nil, fmt.Errorf("apt-get download %s left no .deb in %s", pkg, cache)
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if out, err := exec.Command("dpkg-deb", "-x", debs[len(debs)-1], tmp).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("dpkg-deb -x %s: %v\n%s", debs[len(debs)-1], err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	for _, d := range debs {
		_ = os.Remove(d)
	}
	return readKernel(pkg, dir)
}

// kernelPackage asks apt which kernel package linux-image-amd64 stands
// for today (refreshing the package lists once if apt knows none).
func kernelPackage(apt []string, log io.Writer) (string, error) {
	ask := func() (string, error) {
		out, err := exec.Command("apt-cache", append(append([]string{}, apt...), "depends", "linux-image-amd64")...).Output()
		if err != nil {
			return "", err
		}
		m := reDepends.FindSubmatch(out)
		if m == nil {
			return "", fmt.Errorf("apt-cache depends linux-image-amd64 names no kernel package")
		}
		return string(m[1]), nil
	}
	if p, err := ask(); err == nil {
		return p, nil
	}
	fmt.Fprintln(log, "lab: apt knows no linux-image-amd64; running apt-get update")
	if out, err := exec.Command("apt-get", append(append([]string{}, apt...), "update", "-qq")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get update: %v\n%s", err, out)
	}
	return ask()
}

func readKernel(pkg, dir string) (*Kernel, error) {
	vm, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(vm) != 1 {
		return nil, fmt.Errorf("%s: no single boot/vmlinuz-*", dir)
	}
	rel := strings.TrimPrefix(filepath.Base(vm[0]), "vmlinuz-")
	// Releases with a merged /usr (trixie on) ship the modules below usr/.
	md := filepath.Join(dir, "lib", "modules", rel)
	if _, err := os.Stat(md); err != nil {
		if _, uerr := os.Stat(filepath.Join(dir, "usr", "lib", "modules", rel)); uerr != nil {
			return nil, err
		}
		md = filepath.Join(dir, "usr", "lib", "modules", rel)
	}
	return &Kernel{Package: pkg, Release: rel, Vmlinuz: vm[0], ModDir: md}, nil
}

// guestModules are the drivers the shapes need, with the crypto providers
// that t10-pi's CRCs look up by name at load time (the guest has no
// modprobe to answer the kernel's request_module).
var guestModules = []string{
	"crc64_rocksoft_generic", "crct10dif_generic",
	"virtio_pci", "virtio_net", "virtio_blk", "e1000e", "nvme",
	// the nics shape's older NIC models
	"vmxnet3", "e1000", "8139cp",
	// the systemd guest's root file system
	"crc32c_generic", "ext4",
}

// optionalModules may be missing from a kernel package: 5.10's t10-pi
// has no CRC64 (Rocksoft) provider to load.
var optionalModules = map[string]bool{"crc64_rocksoft_generic": true}

// moduleOrder returns the module files (relative to k.ModDir) to load, in
// an order where each module follows the modules it depends on. The
// dependencies are read from each module's .modinfo ("depends="), the
// field depmod itself reads, so the host needs no kmod.
func (k *Kernel) moduleOrder(names []string) ([]string, error) {
	files := map[string]string{} // module name → path
	err := filepath.WalkDir(k.ModDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".ko") || strings.HasSuffix(p, ".ko.xz")) {
			files[modName(filepath.Base(p))] = p
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A driver the release builds into the kernel (6.12 builds the CRC
	// providers in) needs no loading: modules.builtin lists them.
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(k.ModDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[modName(filepath.Base(l))] = true
		}
	}
	var order []string
	done := map[string]bool{}
	var visit func(n string, depth int) error
	visit = func(n string, depth int) error {
		n = modName(n)
		if done[n] {
			return nil
		}
		if depth > 64 {
			return fmt.Errorf("module dependencies of %s too deep", n)
		}
		p, ok := files[n]
		if !ok && builtin[n] {
			done[n] = true
			return nil
		}
		if !ok {
			return fmt.Errorf("module %s is not in %s", n, k.Package)
		}
		deps, err := modDepends(p)
		if err != nil {
			return err
		}
		sort.Strings(deps)
		for _, d := range deps {
			if err := visit(d, depth+1); err != nil {
				return err
			}
		}
		done[n] = true
		rel, _ := filepath.Rel(k.ModDir, p)
		order = append(order, rel)
		return nil
	}
	for _, n := range names {
		if _, ok := files[modName(n)]; !ok && optionalModules[n] {
			continue // an older kernel without it (built in, or not needed)
		}
		if err := visit(n, 0); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func modName(s string) string {
	return strings.ReplaceAll(strings.TrimSuffix(strings.TrimSuffix(s, ".xz"), ".ko"), "-", "_")
}

// maxModuleBytes bounds a decompressed module: the largest of Debian's
// (amdgpu) is about 20 MB; the lab's drivers are far below.
const maxModuleBytes = 64 << 20

// readModule reads a module file, decompressing an xz one (Debian's
// kernels from 6.6 on ship .ko.xz; the guest's busybox insmod takes plain
// ELF only). The standard library reads no xz: ulikunitz/xz does.
func readModule(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(path, ".xz") {
		return b, err
	}
	r, err := xz.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxModuleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	if len(out) > maxModuleBytes {
		return nil, fmt.Errorf("module %s: more than %d bytes decompressed", path, maxModuleBytes)
	}
	return out, nil
}

// modDepends reads the "depends=" field of a module's .modinfo section.
func modDepends(path string) ([]string, error) {
	data, err := readModule(path)
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, nil
	}
	b, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}
