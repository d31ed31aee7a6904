package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// exactArgs is cobra.ExactArgs with a message that says what is missing.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s needs %s (got %d arguments)\nusage: %s", cmd.Name(), what, len(args), cmd.UseLine())
		}
		return nil
	}
}

// minArgs is cobra.MinimumNArgs with a message that says what is missing.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return fmt.Errorf("%s needs %s (got %d arguments)\nusage: %s", cmd.Name(), what, len(args), cmd.UseLine())
		}
		return nil
	}
}

// runGroup is the RunE of a verb that only groups others (coalesce, sim,
// testbed): alone, it prints its help. It has a RunE at all so that cobra
// checks its arguments with subcommandArgs (cobra suggests only for the
// root's verbs and shows help for a group verb without one).
func runGroup(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// subcommandArgs refuses an unknown subcommand of a group verb, with cobra's
// "did you mean" suggestions as for a mistyped verb.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	return fmt.Errorf("unknown command %q for %q%s", args[0], cmd.CommandPath(), didYouMean(cmd.SuggestionsFor(args[0])))
}

// didYouMean formats suggestions the way cobra does ("" for none).
func didYouMean(suggestions []string) string {
	if len(suggestions) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\nDid you mean this?\n")
	for _, s := range suggestions {
		fmt.Fprintf(&b, "\t%s\n", s)
	}
	return b.String()
}

// suggest returns the known names within edit distance 2 of name, or that
// start with it, as cobra does for verbs (for values such as policy names).
func suggest(name string, known []string) []string {
	if name == "" {
		return nil
	}
	var out []string
	for _, k := range known {
		if levenshtein(strings.ToLower(name), strings.ToLower(k)) <= 2 || strings.HasPrefix(strings.ToLower(k), strings.ToLower(name)) {
			out = append(out, k)
		}
	}
	return out
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
