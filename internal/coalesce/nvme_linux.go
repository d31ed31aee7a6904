//go:build linux

package coalesce

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SendAdmin issues cmd on an NVMe controller character device (/dev/nvmeX)
// with NVME_IOCTL_ADMIN_CMD and returns the completion's result dword.
func SendAdmin(dev string, cmd NVMeAdminCmd) (uint32, error) {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", dev, err)
	}
	defer unix.Close(fd)
	buf := cmd.Marshal()
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(NVMeIoctlAdminCmd), uintptr(unsafe.Pointer(&buf[0])))
	if errno != 0 {
		return 0, fmt.Errorf("%s: NVME_IOCTL_ADMIN_CMD opcode %#x cdw10 %#x cdw11 %#x: %w", dev, cmd.Opcode, cmd.CDW10, cmd.CDW11, errno)
	}
	// result sits at offset 68 of the struct, written back by the kernel.
	return uint32(buf[68]) | uint32(buf[69])<<8 | uint32(buf[70])<<16 | uint32(buf[71])<<24, nil
}
