package kernel

import "testing"

func TestDiskOfDev(t *testing.T) {
	fs := New(tree(t, map[string]string{
		"sys/devices/pci0000:00/0000:00:04.0/virtio1/block/vda/vda1/partition": "1\n",
		"sys/devices/pci0000:00/0000:00:04.0/virtio1/block/vda/size":           "100\n",
		"sys/dev/block/254:0": "->/sys/devices/pci0000:00/0000:00:04.0/virtio1/block/vda",
		"sys/dev/block/254:1": "->/sys/devices/pci0000:00/0000:00:04.0/virtio1/block/vda/vda1",
	}))
	for _, tc := range []struct {
		minor uint32
		want  string
	}{{0, "vda"}, {1, "vda"}} {
		if got, err := fs.DiskOfDev(254, tc.minor); err != nil || got != tc.want {
			t.Errorf("DiskOfDev(254, %d) = %q, %v, want %q", tc.minor, got, err, tc.want)
		}
	}
	if _, err := fs.DiskOfDev(8, 0); err == nil {
		t.Error("DiskOfDev of a missing device: no error")
	}
}
