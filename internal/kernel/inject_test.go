package kernel

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/program"
)

// newAllowed are the directories whose Go files may build an FS with New
// (cmd with every directory below it, the others alone), and why. Every
// other package takes its FS from its caller.
var newAllowed = map[string]string{
	"cmd":                    "the commands build the live machine (and --root's tree) and hand it down",
	"internal/kernel":        "the door itself",
	"internal/load/loadtest": "test helper: builds FSes on its fixture trees",
	"internal/plan/plantest": "test helper: builds FSes on fixture trees",
	"internal/livetest":      "test helper: builds FSes on the host trees it generates",
}

// TestMachineInjected guards the rule that the machine is injected: every
// library function that touches the machine takes its *FS from its caller,
// and only the commands call New("/"). Every non-test Go file of the module
// is parsed (so a comment naming New does not count) and each use of this
// package's New is reported by file and line, except in newAllowed: cmd
// (which builds the live machine), package kernel (the door) and the test
// helpers loadtest, plantest and livetest (which build fixture trees). A
// library that needs another root of the same machine (a namespace's
// /proc/PID/root) derives it from the FS it was given with FS.Sub.
func TestMachineInjected(t *testing.T) {
	_, module := moduleRoot(t)
	kernelPkg := module + "/internal/kernel"
	moduleSources(t, allowedNew, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, sel := range uses(f, kernelPkg, "kernel", "New") {
			t.Errorf("%s:%d builds the machine itself (kernel.New); take a *kernel.FS from the caller (FS.Sub for another root of it)",
				rel, fset.Position(sel.Pos()).Line)
		}
	})
}

// uses are the selectors pkg.Name in f for each name given, where pkg is
// the package imported from path (whose name is def unless renamed).
func uses(f *ast.File, path, def string, names ...string) []*ast.SelectorExpr {
	pkg := ""
	for _, im := range f.Imports {
		if ip, _ := strconv.Unquote(im.Path.Value); ip == path {
			pkg = def
			if im.Name != nil {
				pkg = im.Name.Name
			}
		}
	}
	if pkg == "" || pkg == "_" {
		return nil
	}
	var out []*ast.SelectorExpr
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && slices.Contains(names, sel.Sel.Name) {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == pkg {
				out = append(out, sel)
			}
		}
		return true
	})
	return out
}

// allowedNew reports whether Go files in dir may call New: dir is cmd or
// below it, or exactly one of the other newAllowed packages.
func allowedNew(dir string) bool {
	if dir == "cmd" || strings.HasPrefix(dir, "cmd/") {
		return true
	}
	_, ok := newAllowed[dir]
	return ok
}

// execAllowed are the directories whose Go files may start a process with
// os/exec themselves, and why. Everywhere else a process is started through
// the machine's runner (FS.Programs, package program), which the caller
// chose: one way to start, kill and see them.
var execAllowed = map[string]string{
	"internal/program": "the runner itself",
	"internal/lab": "the lab's harness of virtual machines on the host (QEMU, image builders, ssh), " +
		"not code that runs on a managed machine",
	"internal/livetest": "test helpers: the tools a live test looks with (ip, ethtool) beside the code under test",
}

// TestProcessesInjected: outside execAllowed no non-test Go file calls
// exec.Command or exec.CommandContext.
func TestProcessesInjected(t *testing.T) {
	moduleSources(t, func(dir string) bool { _, ok := execAllowed[dir]; return ok }, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, sel := range uses(f, "os/exec", "exec", "Command", "CommandContext") {
			t.Errorf("%s:%d starts a process itself (exec.%s); start it through the machine's runner (FS.Programs)",
				rel, fset.Position(sel.Pos()).Line, sel.Sel.Name)
		}
	})
}

// Sub roots a new FS at a directory of the machine behind f: the live
// machine's /proc/PID/root is used as it is; below a tree, the directory is
// the tree's.
func TestSub(t *testing.T) {
	if got := New("/").Sub("/proc/1/root").Root(); got != "/proc/1/root" {
		t.Errorf("live Sub root %q", got)
	}
	dir := tree(t, map[string]string{"ns/proc/uptime": "1.00 2.00\n"})
	sub := New(dir).Sub("/ns")
	if sub.Root() != filepath.Join(dir, "ns") || sub.IsLive() {
		t.Errorf("tree Sub root %q", sub.Root())
	}
	if s, err := sub.readString("proc/uptime"); err != nil || s != "1.00 2.00" {
		t.Errorf("read below Sub: %q %v", s, err)
	}
}

// Programs is this machine's runner unless the caller set another.
func TestPrograms(t *testing.T) {
	f := New(t.TempDir())
	if _, ok := f.Programs().(program.Exec); !ok {
		t.Errorf("default runner %T, want program.Exec", f.Programs())
	}
	rec := &program.Recorder{}
	if got := f.SetPrograms(rec).Programs(); got != program.Runner(rec) {
		t.Errorf("SetPrograms: runner %T", got)
	}
}
