package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
)

func init() {
	var o testbed.Options
	var server string
	var threads int
	var wait bool
	cmd := &cobra.Command{
		Use:   "testbed",
		Short: "Create, list and remove the network namespace test bed bench uses",
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "Create a server and a client namespace joined by a veth pair (stale test beds are cleaned first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tb, err := testbed.Up(o)
			if err != nil {
				return err
			}
			switch server {
			case "memcached":
				_, err = tb.StartMemcached(threads)
			case "nginx":
				_, err = tb.StartNginx(threads)
			case "", "none":
			default:
				err = fmt.Errorf("--server %q: want memcached, nginx or none", server)
			}
			if err != nil {
				return joinErr(err, tb.Down())
			}
			if wait {
				// Stay in the foreground; Ctrl-C or SIGTERM removes everything.
				tb.Owner = os.Getpid()
			} else {
				// Hand the test bed over: it lives until `testbed down`.
				tb.Owner, tb.OwnerStartTime = 0, 0
			}
			printTestbed(cmd, tb)
			if !wait {
				return markDetached(tb)
			}
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			<-sig
			return tb.Down()
		},
	}
	up.Flags().IntVar(&o.Queues, "queues", 1, "rx and tx queues of each veth end")
	up.Flags().BoolVar(&o.GRO, "gro", false, "GRO on the veth ends (veth then receives through NAPI)")
	up.Flags().BoolVar(&o.Threaded, "threaded-napi", false, "threaded NAPI on the server end (implies --gro)")
	up.Flags().StringVar(&o.StateDir, "state-dir", testbed.DefaultStateDir, "where test bed state files live")
	up.Flags().StringVar(&server, "server", "none", "server to start inside: memcached, nginx or none")
	up.Flags().IntVar(&threads, "threads", 2, "server threads (memcached) or workers (nginx)")
	up.Flags().BoolVar(&wait, "wait", false, "stay in the foreground and remove the test bed on Ctrl-C")

	down := &cobra.Command{
		Use:   "down [ID…]",
		Short: "Remove the named test beds (all when none is named)",
		RunE: func(cmd *cobra.Command, args []string) error {
			all, err := testbed.List(o.StateDir)
			if err != nil {
				return err
			}
			want := map[string]bool{}
			for _, a := range args {
				want[a] = true
			}
			var errs error
			for _, tb := range all {
				if len(args) > 0 && !want[tb.ID] {
					continue
				}
				delete(want, tb.ID)
				if err := tb.Down(); err != nil {
					errs = joinErr(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", tb.ID)
			}
			for id := range want {
				errs = joinErr(errs, fmt.Errorf("no test bed %s in %s", id, o.StateDir))
			}
			return errs
		},
	}
	down.Flags().StringVar(&o.StateDir, "state-dir", testbed.DefaultStateDir, "where test bed state files live")

	status := &cobra.Command{
		Use:   "status",
		Short: "List test beds, whether their owner still runs, and stray irqp- namespaces",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, err := testbed.List(o.StateDir)
			if err != nil {
				return err
			}
			if global.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"testbeds": all, "namespaces": testbed.Namespaces()})
			}
			for _, tb := range all {
				printTestbed(cmd, tb)
			}
			if len(all) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no test bed")
			}
			if ns := testbed.Namespaces(); len(ns) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "irqp- namespaces present: %v\n", ns)
			}
			return nil
		},
	}
	status.Flags().StringVar(&o.StateDir, "state-dir", testbed.DefaultStateDir, "where test bed state files live")
	cmd.AddCommand(up, down, status)
	rootCmd.AddCommand(cmd)
}

// markDetached rewrites the state file with no owner: the test bed was
// handed to the user and is not stale.
func markDetached(tb *testbed.Testbed) error { return tb.Detach() }

func printTestbed(cmd *cobra.Command, tb *testbed.Testbed) {
	if global.json {
		_ = json.NewEncoder(cmd.OutOrStdout()).Encode(tb)
		return
	}
	state := "owner running"
	switch {
	case tb.Owner == 0:
		state = "detached (remove with `irqpilot testbed down`)"
	case tb.Stale():
		state = "STALE (owner gone; the next `up` removes it)"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n  server ns %s dev %s %s  ↔  client ns %s dev %s %s\n  queues %d  gro %v  threaded napi %v\n",
		tb.ID, state, tb.ServerNS, tb.ServerDev, testbed.ServerAddr, tb.ClientNS, tb.ClientDev, testbed.ClientAddr, tb.Queues, tb.GRO, tb.Threaded)
	for _, p := range tb.Procs {
		fmt.Fprintf(cmd.OutOrStdout(), "  %s pid %d\n", p.Role, p.PID)
	}
}

func joinErr(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return fmt.Errorf("%w; %w", a, b)
}
