package kernel

import (
	"context"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// LinkEvent is a network interface that appeared, changed or disappeared in
// the caller's network namespace.
type LinkEvent struct {
	Name    string
	Index   int
	Removed bool // RTM_DELLINK
}

// WatchLinks subscribes to rtnetlink link events of the calling process's
// network namespace and calls fn for each until ctx ends. It returns once
// the subscription is in place (so a device created after WatchLinks
// returns is reported); the error says why it could not subscribe.
func WatchLinks(ctx context.Context, fn func(LinkEvent)) error {
	ch := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	var subErr error
	if err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) { subErr = err },
	}); err != nil {
		close(done)
		return fmt.Errorf("subscribe to link events (rtnetlink): %w", err)
	}
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case u, ok := <-ch:
				if !ok {
					_ = subErr
					return
				}
				if u.Link == nil || u.Link.Attrs() == nil {
					continue
				}
				fn(LinkEvent{Name: u.Link.Attrs().Name, Index: u.Link.Attrs().Index, Removed: u.Header.Type == unix.RTM_DELLINK})
			}
		}
	}()
	return nil
}
