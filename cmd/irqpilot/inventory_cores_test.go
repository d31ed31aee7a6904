package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

func TestInventoryCoreGrouping(t *testing.T) {
	cpu := func(id, node, pkg, core int, siblings string) host.CPU {
		return host.CPU{ID: id, Online: true, Node: node, Package: pkg, Core: core, Siblings: cpuset.MustParse(siblings)}
	}
	tests := []struct {
		name string
		cpus []host.CPU
		want string // groups as "node/pkg/core:threads", space separated
	}{
		{"SMT pairs", []host.CPU{cpu(0, 0, 0, 0, "0,2"), cpu(1, 0, 0, 1, "1,3"), cpu(2, 0, 0, 0, "0,2"), cpu(3, 0, 0, 1, "1,3")},
			"0/0/0:0,2 0/0/1:1,3"},
		// core_id is not unique within a package on some platforms: the
		// sibling masks tell the cores apart.
		{"core_id repeated within a package", []host.CPU{
			cpu(0, 0, 0, 0, "0,4"), cpu(1, 0, 0, 0, "1,5"), cpu(2, 0, 0, 1, "2,6"), cpu(3, 0, 0, 1, "3,7"),
			cpu(4, 0, 0, 0, "0,4"), cpu(5, 0, 0, 0, "1,5"), cpu(6, 0, 0, 1, "2,6"), cpu(7, 0, 0, 1, "3,7")},
			"0/0/0:0,4 0/0/0:1,5 0/0/1:2,6 0/0/1:3,7"},
		{"same mask in two packages stays apart", []host.CPU{cpu(0, 0, 0, 0, "0-1"), cpu(1, 0, 1, 0, "0-1")},
			"0/0/0:0 0/1/0:1"},
		// Without siblings, core_id groups (the node_exporter tree); with
		// neither, each CPU stands alone.
		{"siblings unknown", []host.CPU{cpu(0, 0, 0, 0, ""), cpu(1, 0, 0, 0, ""), cpu(2, 0, 0, -1, ""), cpu(3, 0, 0, -1, "")},
			"0/0/0:0-1 0/0/-1:2 0/0/-1:3"},
		{"offline CPUs left out, order by node then package", []host.CPU{
			cpu(0, 1, 0, 0, "0"), {ID: 1, Node: 0, Package: 0, Core: 0, Siblings: cpuset.MustParse("1")}, cpu(2, 0, 3, 0, "2"), cpu(3, 0, 1, 0, "3")},
			"0/1/0:3 0/3/0:2 1/0/0:0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, g := range groupCores(tc.cpus) {
				got = append(got, fmt.Sprintf("%d/%d/%d:%s", g.node, g.pkg, g.core, cpuset.Of(g.threads...)))
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("groups %s, want %s", s, tc.want)
			}
		})
	}
}

// The text inventory of a sysfs tree whose core_id repeats within the
// package (two cores report core_id 0, two core_id 1) lists four cores.
func TestInventoryCoresBySiblings(t *testing.T) {
	root := t.TempDir()
	cpu := "sys/devices/system/cpu"
	files := map[string]string{
		cpu + "/online":                         "0-7\n",
		cpu + "/possible":                       "0-7\n",
		"sys/devices/system/node/node0/cpulist": "0-7\n",
	}
	for id := 0; id < 8; id++ {
		core := id % 4 / 2 // 0,0,1,1 for threads 0-3 and again for 4-7
		topo := fmt.Sprintf("%s/cpu%d/topology/", cpu, id)
		files[topo+"core_id"] = fmt.Sprintf("%d\n", core)
		files[topo+"physical_package_id"] = "0\n"
		files[topo+"thread_siblings_list"] = fmt.Sprintf("%d,%d\n", id%4, id%4+4)
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := string(invRun(t, "--root", root, "inventory"))
	for _, want := range []string{"package 0  4 cores, 8 threads", "core 0: 0,4  core 0: 1,5  core 1: 2,6  core 1: 3,7"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}
