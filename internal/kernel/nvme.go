package kernel

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NVMe admin passthrough (include/uapi/linux/nvme_ioctl.h).
const (
	// NVMeAdminCmdSize is sizeof(struct nvme_admin_cmd) (= struct
	// nvme_passthru_cmd).
	NVMeAdminCmdSize = 72
	// NVMeIoctlAdminCmd is NVME_IOCTL_ADMIN_CMD:
	// _IOWR('N', 0x41, struct nvme_admin_cmd).
	NVMeIoctlAdminCmd = 0xC0484E41
)

// NVMeAdmin issues an admin command on an NVMe controller's character
// device (/dev/nvmeX) with NVME_IOCTL_ADMIN_CMD. cmd is struct
// nvme_admin_cmd as the caller laid it out; the kernel writes the
// completion's result dword back into it (offset 68). An error opening the
// device names it; the ioctl's refusal is the errno as is, for the caller
// to describe the command.
func NVMeAdmin(dev string, cmd *[NVMeAdminCmdSize]byte) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", dev, err)
	}
	defer unix.Close(fd)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(NVMeIoctlAdminCmd), uintptr(unsafe.Pointer(&cmd[0])))
	if errno != 0 {
		return errno
	}
	return nil
}
