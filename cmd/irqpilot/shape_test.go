package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxVerbLines bounds a file of this command: a verb parses, validates and
// renders; its work belongs in the packages below (docs/architecture.md).
const maxVerbLines = 300

// TestVerbFilesStayThin fails when a file of the command grows past
// maxVerbLines: split it, or move the work into a package.
func TestVerbFilesStayThin(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > maxVerbLines {
			t.Errorf("%s has %d lines, over %d", f, n, maxVerbLines)
		}
	}
}
