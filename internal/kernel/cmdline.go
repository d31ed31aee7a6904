package kernel

import "strings"

// CmdlineParam is one parameter of the kernel command line: "name=value",
// or a bare "name" (HasValue false).
type CmdlineParam struct {
	Name, Value string
	HasValue    bool
}

// Cmdline reads /proc/cmdline: the kernel's parameters in order, up to
// "--" (what follows is init's). Parameters are split at white space
// (quoted values with spaces are not joined).
func (f *FS) Cmdline() ([]CmdlineParam, error) {
	s, err := f.readString("proc/cmdline")
	if err != nil {
		return nil, err
	}
	return parseCmdline(s), nil
}

func parseCmdline(s string) []CmdlineParam {
	var out []CmdlineParam
	for _, f := range strings.Fields(s) {
		if f == "--" {
			break
		}
		name, val, ok := strings.Cut(f, "=")
		out = append(out, CmdlineParam{Name: name, Value: val, HasValue: ok})
	}
	return out
}
