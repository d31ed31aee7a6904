package kernel

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// moduleRoot is the module's directory and its path, read from go.mod.
func moduleRoot(t *testing.T) (root, module string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	for _, l := range strings.Split(string(mod), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			module = strings.Trim(strings.TrimSpace(m), `"`)
			break
		}
	}
	if module == "" {
		t.Fatal("go.mod names no module")
	}
	return root, module
}

// moduleSources parses every non-test Go file of the module (testdata and
// hidden directories left out) whose module-relative directory skip does
// not refuse, in name order, and calls visit with its module-relative name.
func moduleSources(t *testing.T, skip func(dir string) bool, visit func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root, _ := moduleRoot(t)
	fset := token.NewFileSet()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && rel != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") && !skip(filepath.ToSlash(filepath.Dir(rel))) {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, rel := range files {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		visit(rel, fset, f)
	}
}
