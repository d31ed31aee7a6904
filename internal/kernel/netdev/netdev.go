// Package netdev is a client of the kernel's "netdev" generic-netlink family
// (Documentation/netlink/specs/netdev.yaml): the NAPI instances of network
// devices (napi-get, napi-set) and which NAPI instance serves each queue
// (queue-get). The attributes are encoded and decoded here from the spec;
// the transport is github.com/mdlayher/genetlink.
//
// A netlink socket belongs to the network namespace of the thread that
// opened it: to read another namespace, open the Client on an OS thread
// that has entered it (or in a process started with `ip netns exec`).
//
// Kernels without the family (before 6.9) or without napi-set (before 6.13)
// answer kernel.ErrUnsupported.
package netdev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// FamilyName is the generic-netlink family.
const FamilyName = "netdev"

// Commands (enum netdev_cmd in include/uapi/linux/netdev.h).
const (
	CmdQueueGet = 10
	CmdNAPIGet  = 11
	CmdNAPISet  = 14
)

// Attributes of the "napi" attribute set.
const (
	AttrNAPIIfindex           = 1 // u32
	AttrNAPIID                = 2 // u32
	AttrNAPIIRQ               = 3 // u32
	AttrNAPIPID               = 4 // u32: the NAPI kthread, only when threaded
	AttrNAPIDeferHardIRQs     = 5 // u32 (max S32_MAX), since 6.13
	AttrNAPIGROFlushTimeout   = 6 // uint (4 or 8 bytes), ns, since 6.13
	AttrNAPIIRQSuspendTimeout = 7 // uint, ns, since 6.13
	AttrNAPIThreaded          = 8 // u32 enum napi-threaded (0 disabled, 1 enabled), since 6.17
)

// Attributes of the "queue" attribute set.
const (
	AttrQueueID      = 1 // u32
	AttrQueueIfindex = 2 // u32
	AttrQueueType    = 3 // u32 enum queue-type: 0 rx, 1 tx
	AttrQueueNAPIID  = 4 // u32
)

// MaxDeferHardIRQs is the kernel's limit on defer-hard-irqs (S32_MAX).
const MaxDeferHardIRQs = 1<<31 - 1

// NAPI is one NAPI instance as napi-get reports it. Optional attributes the
// kernel did not send (older kernels) are nil.
type NAPI struct {
	ID                uint32  `json:"id"`
	Ifindex           int     `json:"ifindex"`
	IRQ               *int    `json:"irq,omitempty"`
	PID               *int    `json:"pid,omitempty"`
	DeferHardIRQs     *uint32 `json:"defer_hard_irqs,omitempty"`
	GROFlushTimeout   *uint64 `json:"gro_flush_timeout,omitempty"`
	IRQSuspendTimeout *uint64 `json:"irq_suspend_timeout,omitempty"`
	Threaded          *bool   `json:"threaded,omitempty"`
}

// Queue is one queue as queue-get reports it.
type Queue struct {
	ID      uint32  `json:"id"`
	Ifindex int     `json:"ifindex"`
	Type    string  `json:"type"` // "rx" or "tx"
	NAPIID  *uint32 `json:"napi_id,omitempty"`
}

// NAPISet is a napi-set request: the NAPI instance and the values to set
// (nil: left as is).
type NAPISet struct {
	ID                uint32
	DeferHardIRQs     *uint32
	GROFlushTimeout   *uint64
	IRQSuspendTimeout *uint64
	Threaded          *bool
}

// ErrNoNAPI: no NAPI instance has the id (it went away or never was).
var ErrNoNAPI = errors.New("no such NAPI instance")

// DecodeNAPI decodes the attributes of one napi-get answer.
func DecodeNAPI(b []byte) (NAPI, error) {
	var n NAPI
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return n, err
	}
	seenID := false
	for ad.Next() {
		switch ad.Type() {
		case AttrNAPIIfindex:
			n.Ifindex = int(ad.Uint32())
		case AttrNAPIID:
			n.ID, seenID = ad.Uint32(), true
		case AttrNAPIIRQ:
			v := int(ad.Uint32())
			n.IRQ = &v
		case AttrNAPIPID:
			v := int(ad.Uint32())
			n.PID = &v
		case AttrNAPIDeferHardIRQs:
			v := ad.Uint32()
			n.DeferHardIRQs = &v
		case AttrNAPIGROFlushTimeout:
			v, err := uintAttr(ad.Bytes())
			if err != nil {
				return n, fmt.Errorf("gro-flush-timeout: %w", err)
			}
			n.GROFlushTimeout = &v
		case AttrNAPIIRQSuspendTimeout:
			v, err := uintAttr(ad.Bytes())
			if err != nil {
				return n, fmt.Errorf("irq-suspend-timeout: %w", err)
			}
			n.IRQSuspendTimeout = &v
		case AttrNAPIThreaded:
			v := ad.Uint32() != 0
			n.Threaded = &v
		}
	}
	if err := ad.Err(); err != nil {
		return n, err
	}
	if !seenID {
		return n, errors.New("napi answer without an id")
	}
	return n, nil
}

// DecodeQueue decodes the attributes of one queue-get answer.
func DecodeQueue(b []byte) (Queue, error) {
	var q Queue
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return q, err
	}
	seenType := false
	for ad.Next() {
		switch ad.Type() {
		case AttrQueueID:
			q.ID = ad.Uint32()
		case AttrQueueIfindex:
			q.Ifindex = int(ad.Uint32())
		case AttrQueueType:
			seenType = true
			switch t := ad.Uint32(); t {
			case 0:
				q.Type = "rx"
			case 1:
				q.Type = "tx"
			default:
				q.Type = fmt.Sprintf("type-%d", t)
			}
		case AttrQueueNAPIID:
			v := ad.Uint32()
			q.NAPIID = &v
		}
	}
	if err := ad.Err(); err != nil {
		return q, err
	}
	if !seenType {
		return q, errors.New("queue answer without a type")
	}
	return q, nil
}

// uintAttr decodes a netlink "uint" attribute: 4 or 8 bytes, host order.
func uintAttr(b []byte) (uint64, error) {
	switch len(b) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(b)), nil
	case 8:
		return binary.NativeEndian.Uint64(b), nil
	}
	return 0, fmt.Errorf("uint attribute of %d bytes (want 4 or 8)", len(b))
}

// EncodeNAPISet encodes the attributes of a napi-set request. Timeouts are
// sent as 8-byte uints (the kernel's NLA_UINT takes 4 or 8).
func EncodeNAPISet(s NAPISet) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(AttrNAPIID, s.ID)
	if s.DeferHardIRQs != nil {
		if *s.DeferHardIRQs > MaxDeferHardIRQs {
			return nil, fmt.Errorf("napi %d: defer-hard-irqs %d is above the kernel's limit %d", s.ID, *s.DeferHardIRQs, MaxDeferHardIRQs)
		}
		ae.Uint32(AttrNAPIDeferHardIRQs, *s.DeferHardIRQs)
	}
	if s.GROFlushTimeout != nil {
		ae.Uint64(AttrNAPIGROFlushTimeout, *s.GROFlushTimeout)
	}
	if s.IRQSuspendTimeout != nil {
		ae.Uint64(AttrNAPIIRQSuspendTimeout, *s.IRQSuspendTimeout)
	}
	if s.Threaded != nil {
		v := uint32(0)
		if *s.Threaded {
			v = 1
		}
		ae.Uint32(AttrNAPIThreaded, v)
	}
	return ae.Encode()
}

// EncodeIfindexFilter encodes a dump request limited to one device: attr
// is the set's ifindex attribute (AttrNAPIIfindex, AttrQueueIfindex).
func EncodeIfindexFilter(attr uint16, ifindex int) ([]byte, error) {
	if ifindex <= 0 {
		return nil, nil
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(attr, uint32(ifindex))
	return ae.Encode()
}

// Client talks to the netdev family in the network namespace it was opened in.
type Client struct {
	conn   *genetlink.Conn
	family genetlink.Family
	// trace, when set (tests), sees every request and its answers.
	trace func(req genetlink.Message, flags netlink.HeaderFlags, answers []genetlink.Message, err error)
}

// Open connects to the netdev family. A kernel without it is
// kernel.ErrUnsupported.
func Open() (*Client, error) {
	return open(nil, "")
}

// OpenIn connects to the netdev family of another network namespace, named
// by its nsfs file (/run/netns/NAME, /proc/PID/ns/net). The socket is
// created inside that namespace (the netlink library enters it on a locked
// OS thread and returns) and keeps talking to it: every request through the
// Client sees and changes that namespace's devices, whatever namespace the
// calling thread is in.
func OpenIn(nsPath string) (*Client, error) {
	fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w (is the namespace still there?)", nsPath, err)
	}
	defer unix.Close(fd)
	return open(&netlink.Config{NetNS: fd}, nsPath)
}

func open(cfg *netlink.Config, nsPath string) (*Client, error) {
	c, err := genetlink.Dial(cfg)
	if err != nil {
		if nsPath != "" {
			return nil, fmt.Errorf("generic netlink socket in network namespace %s: %w", nsPath, err)
		}
		return nil, fmt.Errorf("generic netlink socket: %w", err)
	}
	f, err := c.GetFamily(FamilyName)
	if err != nil {
		c.Close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("generic netlink family %q (kernel 6.9 or later): %w", FamilyName, kernel.ErrUnsupported)
		}
		return nil, fmt.Errorf("generic netlink family %q: %w", FamilyName, err)
	}
	return &Client{conn: c, family: f}, nil
}

// Close closes the socket.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) execute(cmd uint8, data []byte, flags netlink.HeaderFlags) ([]genetlink.Message, error) {
	req := genetlink.Message{Header: genetlink.Header{Command: cmd, Version: c.family.Version}, Data: data}
	msgs, err := c.conn.Execute(req, c.family.ID, netlink.Request|flags)
	if c.trace != nil {
		c.trace(req, flags, msgs, err)
	}
	return msgs, mapErr(err)
}

// mapErr gives netlink errors the kernel package's meanings.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w: %v", kernel.ErrUnsupported, err)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w: %v (needs CAP_NET_ADMIN)", kernel.ErrNotPermitted, err)
	}
	return err
}

// NAPIs dumps the NAPI instances of the device ifindex (0: of every device
// in the namespace). A device without NAPI has none.
func (c *Client) NAPIs(ifindex int) ([]NAPI, error) {
	data, err := EncodeIfindexFilter(AttrNAPIIfindex, ifindex)
	if err != nil {
		return nil, err
	}
	msgs, err := c.execute(CmdNAPIGet, data, netlink.Dump)
	if err != nil {
		return nil, fmt.Errorf("napi-get dump: %w", err)
	}
	out := make([]NAPI, 0, len(msgs))
	for _, m := range msgs {
		n, err := DecodeNAPI(m.Data)
		if err != nil {
			return nil, fmt.Errorf("napi-get dump: %w", err)
		}
		out = append(out, n)
	}
	return out, nil
}

// NAPI reads one NAPI instance by id; an unknown id is ErrNoNAPI.
func (c *Client) NAPI(id uint32) (NAPI, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(AttrNAPIID, id)
	data, err := ae.Encode()
	if err != nil {
		return NAPI{}, err
	}
	msgs, err := c.execute(CmdNAPIGet, data, 0)
	if errors.Is(err, unix.ENOENT) {
		return NAPI{}, fmt.Errorf("napi %d: %w", id, ErrNoNAPI)
	}
	if err != nil {
		return NAPI{}, fmt.Errorf("napi-get %d: %w", id, err)
	}
	if len(msgs) != 1 {
		return NAPI{}, fmt.Errorf("napi-get %d: %d answers", id, len(msgs))
	}
	return DecodeNAPI(msgs[0].Data)
}

// Queues dumps the queues of the device ifindex (0: every device).
func (c *Client) Queues(ifindex int) ([]Queue, error) {
	data, err := EncodeIfindexFilter(AttrQueueIfindex, ifindex)
	if err != nil {
		return nil, err
	}
	msgs, err := c.execute(CmdQueueGet, data, netlink.Dump)
	if err != nil {
		return nil, fmt.Errorf("queue-get dump: %w", err)
	}
	out := make([]Queue, 0, len(msgs))
	for _, m := range msgs {
		q, err := DecodeQueue(m.Data)
		if err != nil {
			return nil, fmt.Errorf("queue-get dump: %w", err)
		}
		out = append(out, q)
	}
	return out, nil
}

// SetNAPI sets the given values of one NAPI instance (napi-set, root).
func (c *Client) SetNAPI(s NAPISet) error {
	data, err := EncodeNAPISet(s)
	if err != nil {
		return err
	}
	_, err = c.execute(CmdNAPISet, data, netlink.Acknowledge)
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("napi %d: %w", s.ID, ErrNoNAPI)
	}
	if err != nil {
		return fmt.Errorf("napi-set %d: %w", s.ID, err)
	}
	return nil
}

// Generic-netlink controller (include/uapi/linux/genetlink.h): asked for
// the family's operations, which the library's Family does not carry.
const (
	genlCtrlID         = 0x10 // GENL_ID_CTRL
	ctrlCmdGetFamily   = 3
	ctrlAttrFamilyName = 2
	ctrlAttrOps        = 6
	ctrlAttrOpID       = 1
)

// HasOp reports whether this kernel's netdev family offers command cmd
// (CmdNAPISet, …), from the operations the generic-netlink controller
// lists for it: a feature probe, where a kernel version would only be a
// guess (backports add operations, configurations remove them).
func (c *Client) HasOp(cmd uint8) (bool, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(ctrlAttrFamilyName, FamilyName)
	data, err := ae.Encode()
	if err != nil {
		return false, err
	}
	req := genetlink.Message{Header: genetlink.Header{Command: ctrlCmdGetFamily, Version: 1}, Data: data}
	msgs, err := c.conn.Execute(req, genlCtrlID, netlink.Request)
	if err != nil {
		return false, fmt.Errorf("generic netlink controller, family %q: %w", FamilyName, mapErr(err))
	}
	return familyHasOp(msgs, cmd)
}

// familyHasOp finds cmd among the CTRL_ATTR_OPS of a controller answer.
func familyHasOp(msgs []genetlink.Message, cmd uint8) (bool, error) {
	found := false
	for _, m := range msgs {
		ad, err := netlink.NewAttributeDecoder(m.Data)
		if err != nil {
			return false, err
		}
		for ad.Next() {
			if ad.Type() != ctrlAttrOps {
				continue
			}
			ad.Nested(func(ops *netlink.AttributeDecoder) error {
				for ops.Next() {
					ops.Nested(func(op *netlink.AttributeDecoder) error {
						for op.Next() {
							if op.Type() == ctrlAttrOpID && op.Uint32() == uint32(cmd) {
								found = true
							}
						}
						return nil
					})
				}
				return nil
			})
		}
		if err := ad.Err(); err != nil {
			return false, err
		}
	}
	return found, nil
}
