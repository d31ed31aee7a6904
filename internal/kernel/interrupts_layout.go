package kernel

// nextField splits the first blank-separated field off s.
func nextField(s string) (field, rest string) {
	i := 0
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	j := i
	for j < len(s) && !isBlank(s[j]) {
		j++
	}
	return s[i:j], s[j:]
}

// parseIRQDesc splits what follows a numbered row's counts into the chip,
// hwirq, trigger and actions. The kernel prints (kernel/irq/proc.c) the chip
// name right-aligned in eight columns, the hwirq right-aligned in the label's
// width, then "Level"/"Edge" (CONFIG_GENERIC_IRQ_SHOW_LEVEL) or "-" and the
// flow handler's name, then two spaces and the actions joined by ", ":
//
//	"IO-APIC   2-edge      timer", "GICv3  27 Level     arch_timer",
//	"PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0",
//	"Hyper-V PCIe MSI 4138200989697-edge      mana_q0@pci:7870:00:00.0".
//
// The chip name may hold spaces, so it is not the first field: it is all the
// text before the hwirq, found as the first "N-flow" field or "N" followed
// by a trigger word (a chip whose IRQs have no domain prints a bare trigger
// word instead). Old kernels print no hwirq and glue the chip to the flow
// ("IR-PCI-MSI-edge      eth0", "xen-pirq-ioapic-edge  i8042"); there the
// chip column ends at the first run of two blanks. Kernels older still
// (2.6 on ARM and others) print no chip column at all ("IXP4xx Timer Tick",
// "eth0"): chipless says the file has that layout (see hasChipColumn), and
// the whole text is then the actions.
// All results are substrings of text, so the row costs one string allocation
// plus the action slice.
func parseIRQDesc(line *InterruptLine, text string, chipless bool) {
	if trimString(text) == "" {
		return
	}
	var acts string
	if chipless {
		acts = text
	} else {
		chip, hwirq, trigger, rest, ok := splitAnchor(text)
		if !ok {
			chip, rest = splitColumn(text)
			if i := lastIndexByte(chip, '-'); i > 0 && isTriggerWord(chip[i+1:]) {
				chip, trigger = chip[:i], chip[i+1:]
			}
		}
		line.Chip, line.HWIRQ, line.Trigger = trimString(chip), hwirq, trigger
		acts = rest
	}
	// Actions are joined by ", " and may themselves contain spaces
	// ("PCIe PME, pciehp"), so cut the text rather than the fields.
	n := 0
	for i := 0; i < len(acts); i++ {
		if acts[i] == ',' {
			n++
		}
	}
	for {
		a, more, found := cut(acts, ',')
		if a = trimString(a); a != "" {
			if line.Actions == nil {
				line.Actions = make([]string, 0, n+1)
			}
			line.Actions = append(line.Actions, a)
		}
		if !found {
			break
		}
		acts = more
	}
}

// maxChipWords bounds how many blank-separated words a chip name may have
// before the hwirq ("BRCM STB PCIe MSI" has four); an anchor found later is
// in the actions.
const maxChipWords = 6

// splitAnchor finds the hwirq and trigger after a chip name that may hold
// spaces: the first field that is "N-flow", "N" followed by a trigger word,
// or (no domain, CONFIG_GENERIC_IRQ_SHOW_LEVEL) a bare trigger word, after at
// least one chip word. A lone "N" right after a one-word chip is the hwirq
// of a chip without a flow name. rest is the text after the anchor.
func splitAnchor(text string) (chip, hwirq, trigger, rest string, ok bool) {
	pos := 0
	for k := 0; k <= maxChipWords; k++ {
		f, r := nextField(text[pos:])
		if f == "" {
			return "", "", "", "", false
		}
		start := pos + (len(text[pos:]) - len(r)) - len(f)
		end := start + len(f)
		if k > 0 {
			switch {
			case isHwirqTrigger(f):
				i := indexByte(f, '-')
				return text[:start], f[:i], f[i+1:], text[end:], true
			case isDecimal(f):
				f2, r2 := nextField(text[end:])
				if isTriggerWord(f2) {
					return text[:start], f, f2, r2, true
				}
				if k == 1 {
					return text[:start], f, "", text[end:], true
				}
			case isTriggerWord(f) && k == 1:
				return text[:start], "", f, text[end:], true
			case k == 1 && len(f) > 1 && f[0] == '-':
				// No domain, so no hwirq: the flow name follows the chip
				// ("xen-dyn    -event     vif0-q0-tx", "-edge").
				return text[:start], "", f[1:], text[end:], true
			}
		}
		if indexByte(f, ',') >= 0 {
			return "", "", "", "", false // into the actions
		}
		pos = end
	}
	return "", "", "", "", false
}

// splitColumn cuts text at the first run of two or more blanks after its
// first field: the chip column of old layouts, then the actions.
func splitColumn(text string) (chip, rest string) {
	t := skipBlank([]byte(text))
	off := len(text) - len(t)
	for i := off; i+1 < len(text); i++ {
		if isBlank(text[i]) && isBlank(text[i+1]) {
			return text[off:i], text[i:]
		}
	}
	return text[off:], ""
}

// hasChipColumn reports whether a row's description has a chip column: an
// hwirq anchor or two blank-separated columns. A file in which no numbered
// row has one was printed by a kernel without the chip column.
func hasChipColumn(text string) bool {
	if _, _, _, _, ok := splitAnchor(text); ok {
		return true
	}
	_, rest := splitColumn(text)
	return trimString(rest) != ""
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func lastIndexByte(s string, c byte) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func cut(s string, c byte) (before, after string, found bool) {
	if i := indexByte(s, c); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

func trimString(s string) string {
	i, j := 0, len(s)
	for i < j && isBlank(s[i]) {
		i++
	}
	for j > i && isBlank(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isHwirqTrigger(s string) bool {
	i := indexByte(s, '-')
	return i > 0 && isDecimal(s[:i]) && isTriggerWord(s[i+1:])
}

// isTriggerWord reports whether s is a flow-handler name ("edge", "fasteoi"…)
// as /proc/interrupts prints it after the hwirq, or the "Edge"/"Level" that
// CONFIG_GENERIC_IRQ_SHOW_LEVEL kernels (arm64) print instead.
func isTriggerWord(s string) bool {
	switch s {
	case "edge", "level", "fasteoi", "simple", "percpu", "percpu_devid", "none", "bad",
		"Edge", "Level", "EDGE", "LEVEL":
		return true
	}
	return false
}
