package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// LinkEvent is a network interface that appeared, changed or disappeared in
// the caller's network namespace. Resync (no name) says events may have
// been lost (the subscription was re-established): look at every device.
type LinkEvent struct {
	Name    string
	Index   int
	Removed bool // RTM_DELLINK
	Resync  bool
}

// WatchLinks subscribes to rtnetlink link events of the calling process's
// network namespace and calls fn for each until ctx ends. It returns once
// the subscription is in place (so a device created after WatchLinks
// returns is reported); the error says why it could not subscribe. If the
// kernel drops the subscription (a full socket buffer), it subscribes again
// and reports a Resync event.
func WatchLinks(ctx context.Context, fn func(LinkEvent)) error {
	ch, done, err := subscribeLinks()
	if err != nil {
		return err
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				close(done)
				return
			case u, ok := <-ch:
				if ok {
					if u.Link != nil && u.Link.Attrs() != nil {
						fn(LinkEvent{Name: u.Link.Attrs().Name, Index: u.Link.Attrs().Index, Removed: u.Header.Type == unix.RTM_DELLINK})
					}
					continue
				}
				close(done)
				for {
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Second):
					}
					if ch, done, err = subscribeLinks(); err == nil {
						break
					}
				}
				fn(LinkEvent{Resync: true})
			}
		}
	}()
	return nil
}

func subscribeLinks() (chan netlink.LinkUpdate, chan struct{}, error) {
	ch := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	if err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{}); err != nil {
		close(done)
		return nil, nil, fmt.Errorf("subscribe to link events (rtnetlink): %w", err)
	}
	return ch, done, nil
}
