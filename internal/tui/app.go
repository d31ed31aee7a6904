package tui

import (
	"github.com/gdamore/tcell/v2"
)

// Source produces the next frame; it is called once per interval from a
// goroutine of its own and may block for the interval.
type Source func() (*Frame, error)

// Run shows frames from next on scr until the user quits ('q', Esc or
// Ctrl-C). scr must be initialised; Run does not call Fini.
func Run(scr tcell.Screen, next Source) error {
	type result struct {
		f   *Frame
		err error
	}
	frames := make(chan result, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			f, err := next()
			select {
			case frames <- result{f, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()

	events := make(chan tcell.Event, 16)
	go scr.ChannelEvents(events, stop)

	m := &Model{}
	draw := func() {
		w, h := scr.Size()
		Draw(scr, Render(m, w, h))
	}
	draw()
	for {
		select {
		case r := <-frames:
			if r.err != nil {
				m.Status = "error: " + r.err.Error()
			} else {
				m.Frame, m.Status = r.f, ""
			}
			draw()
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			switch ev := ev.(type) {
			case *tcell.EventResize:
				scr.Sync()
				draw()
			case *tcell.EventKey:
				if HandleKey(m, ev) {
					return nil
				}
				draw()
			}
		}
	}
}

// HandleKey applies a key press to the model and reports whether to quit.
func HandleKey(m *Model, ev *tcell.EventKey) (quit bool) {
	if m.Editing {
		switch ev.Key() {
		case tcell.KeyEnter:
			m.Filter, m.Editing = m.Input, false
		case tcell.KeyEscape:
			m.Filter, m.Input, m.Editing = "", "", false
		case tcell.KeyBackspace, tcell.KeyBackspace2:
			if r := []rune(m.Input); len(r) > 0 {
				m.Input = string(r[:len(r)-1])
			}
		case tcell.KeyCtrlC:
			return true
		case tcell.KeyRune:
			m.Input += string(ev.Rune())
		}
		return false
	}
	switch ev.Key() {
	case tcell.KeyCtrlC, tcell.KeyEscape:
		return true
	case tcell.KeyRune:
		switch ev.Rune() {
		case 'q', 'Q':
			return true
		case 's':
			m.Sort = m.Sort.Next()
		case '/':
			m.Editing, m.Input = true, m.Filter
		}
	}
	return false
}

var styles = map[Style]tcell.Style{
	StyleNormal: tcell.StyleDefault,
	StyleTitle:  tcell.StyleDefault.Bold(true),
	StyleHeader: tcell.StyleDefault.Bold(true).Underline(true),
	StyleUser:   tcell.StyleDefault.Background(tcell.ColorGreen).Foreground(tcell.ColorBlack),
	StyleSystem: tcell.StyleDefault.Background(tcell.ColorBlue).Foreground(tcell.ColorWhite),
	StyleIRQ:    tcell.StyleDefault.Background(tcell.ColorRed).Foreground(tcell.ColorWhite),
	StyleSoft:   tcell.StyleDefault.Background(tcell.ColorFuchsia).Foreground(tcell.ColorBlack),
	StyleOther:  tcell.StyleDefault.Background(tcell.ColorTeal).Foreground(tcell.ColorBlack),
	StyleIdle:   tcell.StyleDefault,
	StyleDim:    tcell.StyleDefault.Dim(true),
	StyleWarn:   tcell.StyleDefault.Foreground(tcell.ColorYellow).Bold(true),
}

// Draw puts a rendered screen on the terminal.
func Draw(scr tcell.Screen, s *Screen) {
	scr.Clear()
	for y, l := range s.Lines {
		for x, c := range l {
			scr.SetContent(x, y, c.Ch, nil, styles[c.Style])
		}
	}
	scr.Show()
}
