// Package packaging holds what `make deb` puts into the Debian package
// besides the binary and what the binary generates (units, manual pages,
// completions): the default configuration, the copyright file and the
// maintainer scripts, under debian/. scripts/build-deb.sh assembles the
// package; deb_test.go builds, lints, installs and purges it on this
// machine, and ansible_test.go rolls it out with deploy/ansible.
package packaging
