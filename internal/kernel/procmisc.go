package kernel

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Uptime reads /proc/uptime: the time since boot of the kernel below the
// root, the one clock two captured trees share.
func (f *FS) Uptime() (time.Duration, error) {
	s, err := f.readString("proc/uptime")
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return 0, fmt.Errorf("%s: empty", f.Path("proc/uptime"))
	}
	sec, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || sec < 0 {
		return 0, fmt.Errorf("%s: %q is not a number of seconds", f.Path("proc/uptime"), fields[0])
	}
	return time.Duration(sec * float64(time.Second)), nil
}

// VLANs reads /proc/net/vlan/config ("eth1.10 | 10 | eth1" lines after a
// two-line header): each VLAN device's lower device, by name.
func (f *FS) VLANs() (map[string]string, error) {
	b, err := f.ReadFile("proc/net/vlan/config")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		fl := strings.Split(line, "|")
		if len(fl) != 3 {
			continue
		}
		dev, id, lower := strings.TrimSpace(fl[0]), strings.TrimSpace(fl[1]), strings.TrimSpace(fl[2])
		if _, err := strconv.Atoi(id); err != nil || dev == "" || lower == "" {
			continue // header "VLAN Dev name | VLAN ID"
		}
		out[dev] = lower
	}
	return out, nil
}
