package bench

import (
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Pinned wraps a Configurator with the scenario's fixed placements: the
// load generator always on Client, the application on App unless the
// configuration places it itself. RPS/RFS on a single-queue NIC's scenario is "the sender
// pinned to CPU 0": every configuration is measured with that.
type Pinned struct {
	Inner       Configurator
	Client, App cpuset.Set
}

// Setup implements Configurator.
func (p Pinned) Setup(config string, h *host.Host, app workload.AppInfo) (*Setup, error) {
	s, err := p.Inner.Setup(config, h, app)
	if err != nil {
		return nil, err
	}
	// The load generator is part of the scenario (RPS/RFS on a single-queue NIC's senders are
	// outside the machine): when the scenario pins it, no configuration
	// moves it.
	if !p.Client.IsEmpty() {
		s.ClientCPUs = p.Client
	}
	if s.AppCPUs.IsEmpty() && !p.App.IsEmpty() {
		s.AppCPUs = p.App
		for _, pid := range app.PIDs {
			ch, err := setting.PinProcess(app.FS, pid, "app", p.App, "scenario: application CPUs")
			if err != nil {
				return nil, err
			}
			s.Changes = append(s.Changes, ch...)
		}
	}
	return s, nil
}
