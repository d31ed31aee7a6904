package netdev

import (
	"errors"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// familyHasOp reads the controller's nested CTRL_ATTR_OPS list.
func TestFamilyHasOp(t *testing.T) {
	ae := netlink.NewAttributeEncoder()
	ae.String(ctrlAttrFamilyName, FamilyName)
	ae.Nested(ctrlAttrOps, func(ops *netlink.AttributeEncoder) error {
		for i, id := range []uint32{CmdQueueGet, CmdNAPIGet} {
			ops.Nested(uint16(i+1), func(op *netlink.AttributeEncoder) error {
				op.Uint32(ctrlAttrOpID, id)
				op.Uint32(2, 0) // CTRL_ATTR_OP_FLAGS
				return nil
			})
		}
		return nil
	})
	data, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	msgs := []genetlink.Message{{Data: data}}
	for cmd, want := range map[uint8]bool{CmdNAPIGet: true, CmdQueueGet: true, CmdNAPISet: false} {
		if got, err := familyHasOp(msgs, cmd); err != nil || got != want {
			t.Errorf("op %d: %v %v, want %v", cmd, got, err, want)
		}
	}
}

// Live: a kernel with the family lists napi-get; no family lists 99.
func TestHasOpLive(t *testing.T) {
	c, err := Open()
	if errors.Is(err, kernel.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, err := c.HasOp(CmdNAPIGet); err != nil || !ok {
		t.Errorf("napi-get: %v %v", ok, err)
	}
	if ok, err := c.HasOp(99); err != nil || ok {
		t.Errorf("op 99: %v %v", ok, err)
	}
}
