package main

import (
	"fmt"
	"time"
)

// autoDuration is a duration flag whose unset value (-1) lets the command
// choose. pflag's DurationVar would show that sentinel as "(default -1ns)"
// in --help and "--sample=-1ns" in the manual page; this one shows "auto",
// and accepts it too.
type autoDuration struct{ d *time.Duration }

func (a autoDuration) String() string {
	if a.d == nil || *a.d < 0 {
		return "auto"
	}
	return a.d.String()
}

func (a autoDuration) Set(s string) error {
	if s == "auto" {
		*a.d = -1
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("%s is negative (give a duration, 0 or auto)", s)
	}
	*a.d = d
	return nil
}

func (a autoDuration) Type() string { return "duration" }
