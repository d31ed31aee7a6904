package setting

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// DescribeMatches says how many processes a selector matched and in which
// network namespaces: "3 processes: pids 100, 101 in the host network
// namespace; pid 230 in network namespace ux-a".
func DescribeMatches(fs *kernel.FS, pids []int) string {
	if len(pids) == 0 {
		return "no running process"
	}
	var order []string
	by := map[string][]string{}
	for _, pid := range pids {
		where := "an unknown network namespace"
		if ns, err := fs.ProcNetNS(pid); err == nil && ns.Inode != 0 {
			where = "network namespace " + ns.String()
			if ns.Initial {
				where = "the host network namespace"
			}
		}
		if _, ok := by[where]; !ok {
			order = append(order, where)
		}
		by[where] = append(by[where], fmt.Sprint(pid))
	}
	var parts []string
	for _, where := range order {
		ps := by[where]
		more := ""
		if len(ps) > 8 {
			more = fmt.Sprintf(" and %d more", len(ps)-8)
			ps = ps[:8]
		}
		word := "pid"
		if len(by[where]) > 1 {
			word = "pids"
		}
		parts = append(parts, fmt.Sprintf("%s %s%s in %s", word, strings.Join(ps, ", "), more, where))
	}
	n := "1 process"
	if len(pids) != 1 {
		n = fmt.Sprintf("%d processes", len(pids))
	}
	return n + ": " + strings.Join(parts, "; ")
}

// CheckMatches refuses a comm selector that matched more than one process
// unless All is set: a name is easy to share (two memcached instances, a
// test copy in a namespace), and pinning the wrong one is silent.
func CheckMatches(fs *kernel.FS, a *AppSelector, pids []int) error {
	if a == nil || a.Comm == "" || a.All || len(pids) <= 1 {
		return nil
	}
	return fmt.Errorf("app comm %s matches %s; name one with pid:N, or allow them all (plan --all, or all: true in the plan's apps entry)", a.Comm, DescribeMatches(fs, pids))
}
