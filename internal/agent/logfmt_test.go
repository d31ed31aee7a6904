package agent

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/setting"
)

func TestLogAttrsOmitEmpty(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	log.Warn("drift repaired", logAttrs("setting", setting.KindIRQAffinity, "target", "irq 24", "device", "",
		"old", "1", "culprit", "", "kind", setting.Kind(""), "repairs", 0, "note", shown(setting.KindXPSCPUs, "00000000,00000003"))...)
	want := `level=WARN msg="drift repaired" setting=irq-affinity target="irq 24" old=1 repairs=0 note=0-1` + "\n"
	if got := b.String(); got != want {
		t.Errorf("log line\n%s want\n%s", got, want)
	}
	if strings.Contains(b.String(), `=""`) {
		t.Errorf("empty field logged: %s", b.String())
	}
}
