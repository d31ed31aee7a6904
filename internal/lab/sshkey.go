package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
)

// SSHKey makes an ed25519 key pair without a passphrase at path (and
// path.pub) with comment, and returns the public key's line. fresh
// replaces a pair already there (a guest's host key, new for each fleet);
// otherwise one there is kept (the controller's client key, reused across
// runs of `lab --fleet --dir`). ssh-keygen makes it: Go's x/crypto/ssh
// can marshal a public key but writes no OpenSSH private key file, which
// ssh and the guests' sshd read.
func SSHKey(path, comment string, fresh bool) (string, error) {
	if fresh {
		for _, p := range []string{path, path + ".pub"} {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", err
			}
		}
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path).CombinedOutput(); err != nil {
			return "", fmt.Errorf("ssh-keygen: %v: %s", err, strings.TrimSpace(string(out)))
		}
	} else if err != nil {
		return "", err
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		return "", err
	}
	if f := strings.Fields(string(pub)); len(f) < 2 {
		return "", fmt.Errorf("%s.pub holds no public key: %q", path, pub)
	}
	return string(pub), nil
}
