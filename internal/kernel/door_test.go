package kernel

import (
	"go/ast"
	"go/token"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// kernelPath is a string literal that is a path below /proc or /sys and
// nothing else (no prose around it): "proc/irq/%d/node", "/sys/class/net",
// "sys/block/", "proc". A message that only mentions a path ("/proc/stat: no
// per-CPU lines") has a space in it and is not one; a bare "sys" is the
// CPU-time column, not a directory.
var kernelPath = regexp.MustCompile(`^(/?(proc|sys)/\S*|/proc|/sys|proc)$`)

// doorAllowed are the files outside package kernel that may still spell a
// kernel path, with how many literals each may hold. The count is a
// ratchet: a file may hold fewer (lower its number, or drop it) but never
// more, and a file not listed may hold none. Paths belong in package
// kernel, behind a typed FS method with a private parser.
var doorAllowed = map[string]struct {
	n      int
	reason string
}{
	// Excepted by design: their job is to name kernel files.
	"internal/capture/capture.go":        {22, "capture: the files a capture must hold"},
	"internal/hostgen/write.go":          {9, "test-tree generator: writes a machine's /proc and /sys"},
	"internal/hostgen/write_counters.go": {4, "test-tree generator"},
	"internal/hostgen/write_devices.go":  {11, "test-tree generator"},
	"internal/plan/plantest/hosts.go":    {1, "test-tree generator: writes proc/interrupts"},
	"internal/setting/file.go":           {2, "setting kind: names the rps/xps queue files it writes"},
	"internal/setting/sysctl.go":         {6, "setting kind: names the sysctl files it writes, and the files its feature probes look for"},
	"internal/setting/devnapi.go":        {4, "setting kind: names the sys/class/net/DEV file it writes, and the files its feature probe looks for"},
	"internal/setting/steering.go":       {12, "setting kind: the globs of the files it writes, and the files its feature probes look for"},
	"internal/setting/irqaffinity.go":    {7, "setting kind: the glob of the files it writes, and the files its feature probes look for"},
	"internal/bench/testbed/testbed.go":  {2, "testbed: a namespace's own /sys, and a server's /proc/PID/root for nsenter"},

	// Names of a source in an "unavailable" note, for people.
	"internal/load/sample.go":             {3, "names /proc/softirqs, softnet_stat and net/dev when unavailable"},
	"internal/host/irqbalance.go":         {2, "names /proc/PID/environ when unavailable"},
	"internal/host/topology_isolation.go": {1, "names /proc/cmdline when unavailable"},
}

// TestKernelDoor: only package kernel reads /proc and /sys. Every other
// package's Go source (tests excepted: they build trees) is scanned for
// string literals that are kernel paths.
func TestKernelDoor(t *testing.T) {
	got := map[string][]string{}
	inKernel := func(dir string) bool { return dir == "internal/kernel" || strings.HasPrefix(dir, "internal/kernel/") }
	moduleSources(t, inKernel, func(rel string, fset *token.FileSet, f *ast.File) {
		imports := map[*ast.BasicLit]bool{}
		for _, im := range f.Imports {
			imports[im.Path] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || imports[lit] {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && kernelPath.MatchString(s) {
				got[rel] = append(got[rel], fset.Position(lit.Pos()).String()+": "+lit.Value)
			}
			return true
		})
	})
	total := 0
	files := make([]string, 0, len(got))
	for f := range got {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		uses := got[f]
		total += len(uses)
		if len(uses) > doorAllowed[f].n {
			t.Errorf("%s spells %d kernel paths (allowed %d); read them through a kernel.FS method:\n\t%s",
				f, len(uses), doorAllowed[f].n, strings.Join(uses, "\n\t"))
		}
	}
	for f, a := range doorAllowed {
		if len(got[f]) < a.n {
			t.Errorf("%s now spells %d kernel paths: lower its allowance from %d", f, len(got[f]), a.n)
		}
	}
	t.Logf("%d kernel path literals in %d files outside package kernel", total, len(got))
}

// settingDoor are the FS methods that read a kernel file by the name the
// caller gives: the setting kinds' door (fs_write.go), beside WriteFile.
var settingDoor = map[string]bool{"ReadSettingFile": true, "GlobSettingFiles": true}

// settingDoorAllowed are the packages that may call the settingDoor
// methods, each with its reason. Every other package reads the kernel
// through typed methods.
var settingDoorAllowed = map[string]string{
	"internal/setting": "the setting kinds name the files they write, read back the value in force and look for the files to tell whether the kernel has them",
}

// TestSettingDoor: outside package kernel, only the packages of
// settingDoorAllowed call the setting-file door (tests excepted: they read
// back what the code under test wrote). A method of that name is found by
// its selector wherever it is used, called or taken as a value.
func TestSettingDoor(t *testing.T) {
	inKernel := func(dir string) bool { return dir == "internal/kernel" || strings.HasPrefix(dir, "internal/kernel/") }
	used := map[string]bool{}
	moduleSources(t, inKernel, func(rel string, fset *token.FileSet, f *ast.File) {
		dir := path.Dir(rel)
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || !settingDoor[sel.Sel.Name] {
				return true
			}
			if _, ok := settingDoorAllowed[dir]; ok {
				used[dir] = true
				return true
			}
			t.Errorf("%s:%d: %s is the setting kinds' door (for %s only); read the kernel through a typed kernel.FS method",
				rel, fset.Position(sel.Sel.Pos()).Line, sel.Sel.Name, strings.Join(slices.Sorted(maps.Keys(settingDoorAllowed)), ", "))
			return true
		})
	})
	for dir := range settingDoorAllowed {
		if !used[dir] {
			t.Errorf("%s no longer calls the setting-file door: drop it from settingDoorAllowed", dir)
		}
	}
}
