package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binary and the generated host the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if bigHostBuilt {
		if dir, _ := bigHost(); dir != "" {
			os.RemoveAll(dir)
		}
	}
	if binaryBuilt {
		if bin, _ := binary(); bin != "" {
			os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}
