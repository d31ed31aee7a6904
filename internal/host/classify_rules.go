package host

import "regexp"

// The rule table: action names that no driver convention in
// classify_action.go reads, each classed by a pattern. A rule may also ask
// for the IRQ's chip, for names that mean something only on one chip
// ("timer3" is Xen's per-vCPU timer on the xen-percpu-virq chip). The first
// matching rule decides. Every rule says in one comment line why it exists.

// nameRule classes the IRQs whose action matches re (and whose chip
// matches chip, when set).
type nameRule struct {
	re    *regexp.Regexp
	chip  *regexp.Regexp
	class Class
	// kind is what the rule recognised, for the device: "platform" names
	// the device after the action itself ("fe310000.mmc").
	kind string
}

func rule(class Class, re string) nameRule {
	return nameRule{re: regexp.MustCompile(re), class: class}
}

var nameRules = []nameRule{
	// ARM generic timer and KVM's guest timers: per-CPU PPIs (arm_arch_timer.c, arch_timer.c of kvm).
	rule(ClassTimer, `^(?:arch_timer|arch_mem_timer|kvm guest [vph]timer)$`),
	// Cortex-A9/A5 MPCore per-CPU local and global timers (smp_twd.c "twd", arm_global_timer.c "gt").
	rule(ClassTimer, `^(?:twd|gt|local_timer|percpu_timer)$`),
	// SoC clockevents that request_irq under their driver's own name (drivers/clocksource/): qcom, rockchip, cadence ttc, i.MX gpt, exynos mct, sunxi, meson, riscv.
	rule(ClassTimer, `^(?:gp_timer|rk_timer|ttc_clockevent|mxc_timer\d*|mct_tick\d+|mct_comp_irq|sun4i_tick|sun5i_tick|meson6_timer|riscv-timer|bcm2835-timer|sp804|dmtimer|mtk_timer|owl-timer|stm32_timer)$`),
	// timer_of clockevents are named after their device-tree node ("timer@306a0000", "timer").
	rule(ClassTimer, `^timer(?:@[0-9a-f]+)?$`),
	// Vendor clockevents named "<SoC> Timer Tick" or "<SoC> TIMER-<n>" (IXP4xx, i.MX, BCM2708; Meson's per-CPU TIMER-F … TIMER-I).
	rule(ClassTimer, `(?i)^[\w.]+ timer(?: tick|-[a-z0-9]+)?$`),
	// Xen's per-vCPU timer event channel, "timerN" on the xen-percpu-virq chip (events_base.c VIRQ_TIMER).
	{re: regexp.MustCompile(`^timer\d+$`), chip: regexp.MustCompile(`^xen-percpu-virq$`), class: ClassTimer},
	// The PC floppy controller (floppy.c).
	rule(ClassStorage, `^floppy$`),
	// Xen's block frontend event channel (xen-blkfront.c).
	rule(ClassStorage, `^blkif$`),
	// POWER virtual SCSI and FC clients (ibmvscsi.c, ibmvfc.c).
	rule(ClassStorage, `^ibmv(?:scsi|fc)$`),
	// SD/MMC host controllers under their drivers' names (sdhci, dw_mmc, mmci, sunxi-mmc, omap_hsmmc, msdc, renesas_sdhi).
	rule(ClassStorage, `^(?:sdhci|dw-mci|dw_mmc|mmci|sunxi-mmc|omap_hsmmc|mtk-msdc|msdc|renesas_sdhi|tmio|bcm2835-sdhost|mxs-mmc|atmel_mci|meson-gx-mmc)`),
	// Amlogic's SD/eMMC and SD/SDIO hosts on 3.x kernels ("sdhc", "sdio").
	rule(ClassStorage, `^(?:sdhc|sdio)$`),
	// SD hosts under a vendor-prefixed name ("bcm2708_sdhci (dma)", "bcm2835-sdhost").
	rule(ClassStorage, `^\w+[-_](?:sdhci|sdhost)\b`),
	// Platform storage controllers named by bus address ("fe310000.mmc", "fe2e0000.sdhci", "a2000000.ufs").
	{re: regexp.MustCompile(`^[0-9a-f]+\.(?:mmc|sdhci|dwmmc|sdmmc|emmc|sd|sata|ahci|ufs|ufshc|nvme)\d*$`), class: ClassStorage, kind: "platform"},
	// Platform Ethernet MACs named by bus address ("fe2a0000.ethernet", "1c30000.gmac").
	{re: regexp.MustCompile(`^[0-9a-f]+\.(?:ethernet|eth|gmac|mac|emac)\d*$`), class: ClassNetwork, kind: "platform"},
}

// ruleFor returns the first rule matching action on chip, or nil.
func ruleFor(action, chip string) *nameRule {
	for i := range nameRules {
		r := &nameRules[i]
		if r.re.MatchString(action) && (r.chip == nil || r.chip.MatchString(chip)) {
			return r
		}
	}
	return nil
}
