package load_test

import (
	"testing"

	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/load/loadtest"
)

// A thread uses at most one CPU: skewed tick reads over a short interval
// never show more than 100 %.
func TestTaskBusyAtMostOneCPU(t *testing.T) {
	c := loadtest.Craft(2).CPU(0, 50, 10, 0, 35, 5)
	c.A.Tasks = []load.TaskTimes{{PID: 7, TID: 7, Comm: "spin", UTime: 100, CPU: 0}}
	c.B.Tasks = []load.TaskTimes{{PID: 7, TID: 7, Comm: "spin", UTime: 235, CPU: 0}} // 135 ticks in 1 s
	l := c.Load(t)
	if len(l.Tasks) != 1 || l.Tasks[0].Busy != 100 {
		t.Errorf("tasks %+v, want spin at 100%%", l.Tasks)
	}
}
