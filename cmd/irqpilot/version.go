package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is the release, set at build time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/irqpilot
//
// Empty: the main module's version from the build information, else "devel".
var version = ""

// versionString is what --version prints after "irqpilot": the version, the
// commit it was built from (when known) and the Go release that built it.
func versionString() string {
	return formatVersion(version, readBuildInfo())
}

func readBuildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

func formatVersion(override string, bi *debug.BuildInfo) string {
	v, commit, dirty, goVersion := override, "", false, runtime.Version()
	if bi != nil {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	if commit == "" {
		return fmt.Sprintf("%s (%s)", v, goVersion)
	}
	if dirty {
		commit += ", modified"
	}
	return fmt.Sprintf("%s (commit %s, %s)", v, commit, goVersion)
}
