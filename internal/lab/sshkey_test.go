package lab

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SSHKey keeps a key pair already there unless asked for a fresh one.
func TestSSHKey(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("no ssh-keygen (make test installs openssh-client)")
	}
	key := filepath.Join(t.TempDir(), "id_ed25519")
	a, err := SSHKey(key, "lab-test", false)
	if err != nil {
		t.Fatal(err)
	}
	// type, key, comment
	if f := strings.Fields(a); len(f) != 3 || f[0] != "ssh-ed25519" || f[2] != "lab-test" {
		t.Fatalf("public key %q: want an ed25519 key with the comment", a)
	}
	if b, err := SSHKey(key, "lab-test", false); err != nil || b != a {
		t.Errorf("kept key: %q, %v; want the first key again", b, err)
	}
	if c, err := SSHKey(key, "lab-test", true); err != nil || c == a {
		t.Errorf("fresh key: %q, %v; want a new key", c, err)
	}
}
