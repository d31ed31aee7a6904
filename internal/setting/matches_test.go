package setting

import (
	"strings"
	"testing"
)

// A comm selector that matches two processes is refused at expand (apply)
// time, naming how many and their pids, unless All is set; then every one
// is pinned.
func TestExpandCommMatchingSeveralNeedsAll(t *testing.T) {
	fs := tree(t, map[string]string{
		"proc/100/comm":          "memcached\n",
		"proc/100/stat":          statLine(100, "memcached", 7000),
		"proc/100/task/100/stat": "",
		"proc/300/comm":          "memcached\n",
		"proc/300/stat":          statLine(300, "memcached", 9000),
		"proc/300/task/300/stat": "",
	})
	app := Change{Kind: KindApp, Target: "comm memcached", App: &AppSelector{Comm: "memcached"}, Value: "2-3", Reason: "app", Line: 5}
	_, _, err := Expand(fs, []Change{app})
	if err == nil || !strings.Contains(err.Error(), "plan line 5: app comm memcached matches 2 processes: pids 100, 300") || !strings.Contains(err.Error(), "all: true") {
		t.Fatalf("two matches without all: %v", err)
	}
	app.App.All = true
	changes, _, err := Expand(fs, []Change{app})
	if err != nil || len(changes) != 2 {
		t.Fatalf("with all: %d changes, %v", len(changes), err)
	}
	// One match, or a pid selector: no question.
	one := Change{Kind: KindApp, Target: "pid 100", App: &AppSelector{PID: 100}, Value: "1", Reason: "app"}
	if _, _, err := Expand(fs, []Change{one}); err != nil {
		t.Errorf("pid selector: %v", err)
	}
}
