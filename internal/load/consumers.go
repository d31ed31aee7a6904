package load

import "github.com/irqpilot/irqpilot/internal/kernel"

// SetConsumers records which processes consume network traffic: of the
// socket owners (kernel.FS.SocketOwners, read on the live machine), those
// that serve connections or a UDP service port. Without it (captured
// state), nothing tells a server from its load generator.
func (l *Load) SetConsumers(owners []kernel.SocketOwner) {
	l.Consumers = []kernel.SocketOwner{}
	for _, o := range owners {
		if o.Serves() {
			l.Consumers = append(l.Consumers, o)
		}
	}
}

// Consumer is pid's entry in Consumers, nil when it is not one.
func (l *Load) Consumer(pid int) *kernel.SocketOwner {
	for i := range l.Consumers {
		if l.Consumers[i].PID == pid {
			return &l.Consumers[i]
		}
	}
	return nil
}
