package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// testbedStatusJSON is `testbed status --json`.
type testbedStatusJSON struct {
	Namespaces []string           `json:"namespaces"` // irqp- network namespaces present
	Testbeds   []*testbed.Testbed `json:"testbeds"`
}

func newTestbedCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "testbed",
		Short: "Create, list and remove the network namespace test bed bench uses",
		Args:  subcommandArgs,
		RunE:  runGroup,
	}
	cmd.AddCommand(newTestbedUpCmd(g), newTestbedDownCmd(), newTestbedStatusCmd(g))
	return cmd
}

func testbedStateDirFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "state-dir", testbed.DefaultStateDir, "where test bed state files live")
}

// testbedUpOptions are `testbed up`'s flags.
type testbedUpOptions struct {
	g       *globalFlags
	tb      testbed.Options
	server  string
	threads int
	wait    bool
}

func newTestbedUpCmd(g *globalFlags) *cobra.Command {
	o := &testbedUpOptions{g: g}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create a server and a client namespace joined by a veth pair (stale test beds are cleaned first)",
		Args:  cobra.NoArgs,
		RunE:  runE(o),
	}
	f := cmd.Flags()
	f.IntVar(&o.tb.Queues, "queues", 1, "rx and tx queues of each veth end")
	f.BoolVar(&o.tb.GRO, "gro", false, "GRO on the veth ends (veth then receives through NAPI)")
	f.BoolVar(&o.tb.Threaded, "threaded-napi", false, "threaded NAPI on the server end (implies --gro)")
	testbedStateDirFlag(cmd, &o.tb.StateDir)
	f.StringVar(&o.tb.Prefix, "prefix", testbed.Prefix, "start of the test bed's ID and its namespaces' names (`NAME`: lower-case letters, digits, '-', '_')")
	f.StringVar(&o.server, "server", "none", "server to start inside: memcached, nginx or none")
	f.IntVar(&o.threads, "threads", 2, "server threads (memcached) or workers (nginx)")
	f.BoolVar(&o.wait, "wait", false, "stay in the foreground and remove the test bed on Ctrl-C, SIGTERM or SIGHUP")
	return cmd
}

// complete gives the test bed the live machine.
func (o *testbedUpOptions) complete(*cobra.Command, []string) error {
	o.tb.FS = kernel.New("/")
	return nil
}

func (o *testbedUpOptions) validate() error {
	switch o.server {
	case "memcached", "nginx", "", "none":
		return nil
	}
	return flagErrorf("--server", "--server %q: want memcached, nginx or none", o.server)
}

func (o *testbedUpOptions) run(_ context.Context, out, _ io.Writer) error {
	// With --wait, a stop signal from the start is kept until the test bed
	// is up, then removes it: none kills the process between the two.
	sig := make(chan os.Signal, 1)
	if o.wait {
		signal.Notify(sig, stopSignals...)
		defer signal.Stop(sig)
	}
	tb, err := testbed.Up(o.tb)
	if err != nil {
		return err
	}
	switch o.server {
	case "memcached":
		_, err = tb.StartMemcached(o.threads)
	case "nginx":
		_, err = tb.StartNginx(o.threads)
	}
	if err != nil {
		return joinErr(err, tb.Down())
	}
	if o.wait {
		// Stay in the foreground; Ctrl-C, SIGTERM or SIGHUP removes everything.
		tb.Owner = os.Getpid()
	} else {
		// Hand the test bed over: it lives until `testbed down`.
		tb.Owner, tb.OwnerStartTime = 0, 0
	}
	printTestbed(out, tb, o.g.json)
	if !o.wait {
		// Rewrite the state file with no owner: the test bed was handed
		// to the user and is not stale.
		return tb.Detach()
	}
	<-sig
	return tb.Down()
}

// testbedDownOptions are `testbed down`'s flags and arguments.
type testbedDownOptions struct {
	stateDir string
	ids      []string
	fs       *kernel.FS
}

func newTestbedDownCmd() *cobra.Command {
	o := &testbedDownOptions{}
	cmd := &cobra.Command{
		Use:   "down [ID…]",
		Short: "Remove the named test beds (when none is named, every one this user made in --state-dir)",
		RunE:  runE(o),
	}
	testbedStateDirFlag(cmd, &o.stateDir)
	return cmd
}

// complete takes the IDs named and the live machine.
func (o *testbedDownOptions) complete(_ *cobra.Command, args []string) error {
	o.ids, o.fs = args, kernel.New("/")
	return nil
}

func (o *testbedDownOptions) run(_ context.Context, out, _ io.Writer) error {
	all, err := testbed.List(o.fs, o.stateDir)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, a := range o.ids {
		want[a] = true
	}
	var errs error
	var others []string
	for _, tb := range all {
		if len(o.ids) > 0 && !want[tb.ID] {
			continue
		}
		if len(o.ids) == 0 && !tb.Mine() {
			others = append(others, tb.ID)
			continue
		}
		delete(want, tb.ID)
		if err := tb.Down(); err != nil {
			errs = joinErr(errs, err)
			continue
		}
		fmt.Fprintf(out, "removed %s (namespaces %s)\n", tb.ID, strings.Join(tb.Namespaces(), ", "))
	}
	if len(o.ids) == 0 && len(all) == len(others) {
		fmt.Fprintf(out, "no test bed of yours in %s\n", o.stateDir)
	}
	if len(others) > 0 {
		fmt.Fprintf(out, "left %s: made by another user (name them to remove them)\n", strings.Join(others, ", "))
	}
	for id := range want {
		errs = joinErr(errs, fmt.Errorf("no test bed %s in %s", id, o.stateDir))
	}
	return errs
}

// testbedStatusOptions are `testbed status`'s flags.
type testbedStatusOptions struct {
	g        *globalFlags
	stateDir string
	fs       *kernel.FS
}

func newTestbedStatusCmd(g *globalFlags) *cobra.Command {
	o := &testbedStatusOptions{g: g}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List test beds, whether their owner still runs, and stray irqp- namespaces",
		Args:  cobra.NoArgs,
		RunE:  runE(o),
	}
	testbedStateDirFlag(cmd, &o.stateDir)
	return cmd
}

// complete takes the live machine.
func (o *testbedStatusOptions) complete(*cobra.Command, []string) error {
	o.fs = kernel.New("/")
	return nil
}

func (o *testbedStatusOptions) run(_ context.Context, out, _ io.Writer) error {
	all, err := testbed.List(o.fs, o.stateDir)
	if err != nil {
		return err
	}
	if o.g.json {
		return writeJSONLine(out, testbedStatusJSON{Namespaces: testbed.Namespaces(), Testbeds: all})
	}
	for _, tb := range all {
		printTestbed(out, tb, false)
	}
	if len(all) == 0 {
		fmt.Fprintln(out, "no test bed")
	}
	if ns := testbed.Namespaces(); len(ns) > 0 {
		fmt.Fprintf(out, "irqp- namespaces present: %v\n", ns)
	}
	return nil
}

func printTestbed(w io.Writer, tb *testbed.Testbed, asJSON bool) {
	if asJSON {
		_ = writeJSONLine(w, tb)
		return
	}
	state := "owner running"
	switch {
	case tb.Owner == 0:
		state = "detached (remove with `irqpilot testbed down`)"
	case tb.Stale():
		state = "STALE (owner gone; the next `up` removes it)"
	}
	fmt.Fprintf(w, "%s  %s\n  server ns %s dev %s %s  ↔  client ns %s dev %s %s\n  queues %d  gro %v  threaded napi %v\n",
		tb.ID, state, tb.ServerNS, tb.ServerDev, testbed.ServerAddr, tb.ClientNS, tb.ClientDev, testbed.ClientAddr, tb.Queues, tb.GRO, tb.Threaded)
	for _, p := range tb.Procs {
		fmt.Fprintf(w, "  %s pid %d\n", p.Role, p.PID)
	}
}
