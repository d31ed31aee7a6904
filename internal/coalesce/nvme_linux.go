//go:build linux

package coalesce

import (
	"fmt"
	"syscall"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// SendAdmin issues cmd on an NVMe controller character device (/dev/nvmeX)
// with NVME_IOCTL_ADMIN_CMD and returns the completion's result dword.
func SendAdmin(dev string, cmd NVMeAdminCmd) (uint32, error) {
	buf := cmd.Marshal()
	if err := kernel.NVMeAdmin(dev, &buf); err != nil {
		if errno, ok := err.(syscall.Errno); ok { // the ioctl's refusal; open errors name dev already
			return 0, fmt.Errorf("%s: NVME_IOCTL_ADMIN_CMD opcode %#x cdw10 %#x cdw11 %#x: %w", dev, cmd.Opcode, cmd.CDW10, cmd.CDW11, errno)
		}
		return 0, err
	}
	// result sits at offset 68 of the struct, written back by the kernel.
	return uint32(buf[68]) | uint32(buf[69])<<8 | uint32(buf[70])<<16 | uint32(buf[71])<<24, nil
}
