package main

import "github.com/spf13/cobra"

// examples are the Example fields of the verbs, by command path below the
// root ("coalesce show"). They live in one table, not in each verb's file,
// so that --help and the manual pages show the same everyday commands the
// README and docs/guide.md use, and one reading checks them all.
var examples = map[string]string{
	"": `  irqpilot doctor                                    # what holds this machine back, and the fix
  irqpilot plan --device eth1 -o plan.yaml           # a plan, and what it would change
  irqpilot apply --dry-run plan.yaml
  irqpilot apply --verify plan.yaml                  # journaled; checks the prediction; prints the undo command
  irqpilot revert`,
	"inventory": `  irqpilot inventory
  irqpilot inventory --json | jq '.nics[] | {name, node}'
  irqpilot inventory --snapshot host.tar.gz          # a capture made elsewhere`,
	"capture": `  irqpilot capture -o host.tar.gz
  irqpilot capture --redact -o host.tar.gz           # keep only the kernel parameters irqpilot reads
  irqpilot doctor --snapshot host.tar.gz             # anywhere, later`,
	"top": `  irqpilot top                                       # s: sort, /: filter, q: quit
  irqpilot top --once --json`,
	"doctor": `  irqpilot doctor
  irqpilot doctor --duration 30s --json
  irqpilot doctor --root before/ --after after/      # two captures of one machine`,
	"record": `  irqpilot record -o run.jsonl --duration 10m
  irqpilot report run.jsonl -o run.html`,
	"report": `  irqpilot report run.jsonl -o run.html
  irqpilot report db1.jsonl db2.jsonl -o cluster.png
  irqpilot report --prometheus http://prometheus:9090 --range 1h --step 30s -o hour.html`,
	"plan": `  irqpilot plan --device eth1 -o plan.yaml          # auto: changes only what hurts
  irqpilot plan --policy per-queue --device eth1 --app comm:memcached -o plan.yaml
  irqpilot plan --policy rps-spread --device eth1 --machine-wide
  irqpilot plan --policy auto --snapshot a.tar.gz --after b.tar.gz
  irqpilot plan --remedy interrupt-bound-cpu:cpu0 -o fix.yaml   # doctor's fix for that finding, as a plan`,
	"apply": `  irqpilot apply --dry-run plan.yaml                 # what would change; writes nothing
  irqpilot --snapshot web1.tar.gz apply --dry-run plan.yaml   # what it would change on a captured machine
  irqpilot apply plan.yaml                           # prints the journal ID and the undo command
  irqpilot apply --replace plan.yaml                 # also undo what earlier plans set and this one does not
  irqpilot apply --verify --revert-if worse plan.yaml   # measure before and after; undo if it made things worse`,
	"verify": `  irqpilot verify                                    # the newest applied journal's prediction, measured now
  irqpilot verify --journal 20261122T113456Z --duration 10s --json`,
	"revert": `  irqpilot revert                                    # the newest applied journal
  irqpilot revert --to 20261122T113456Z
  irqpilot revert --session                          # everything the last agent or bench run applied
  irqpilot revert --all`,
	"history": `  irqpilot history
  irqpilot history --json`,
	"persist": `  irqpilot persist plan.yaml                         # apply at boot and when a NIC appears
  irqpilot persist --agent plan.yaml                 # or keep it in force with the agent
  irqpilot persist --remove`,
	"agent": `  irqpilot agent --plan /etc/irqpilot/plan.yaml
  irqpilot agent --policy per-queue --device eth1
  irqpilot agent --policy auto --adapt --device eth1 --app comm:memcached
  kill -HUP $(pidof irqpilot)                        # reload the edited plan`,
	"status": `  irqpilot status
  irqpilot status --json`,
	"bench": `  irqpilot bench --workload memcached --queues 2 --configs default,per-queue,auto --rounds 6 --aa
  irqpilot bench --workload udp --queues 1 --configs default,rps-spread,auto -o udp.json --chart udp.png
  irqpilot bench --workload mysql --configs default,rps-spread --sweep connections=1,4,16,64 --chart curve.png
  irqpilot bench --from udp.json --baseline rps-spread`,
	"tune":       `  irqpilot tune --auto --workload memcached --queues 2 --budget 10m -o tune.json`,
	"testbed up": `  irqpilot testbed up --queues 2 --server memcached --wait`,
	"coalesce show": `  irqpilot coalesce show
  irqpilot coalesce show --per-queue`,
	"coalesce nvme": `  irqpilot coalesce nvme                             # decisions only (--dry-run is the default)
  irqpilot coalesce nvme --dry-run=false --count 0   # send them to the controller until Ctrl-C`,
	"sim coalesce": `  irqpilot sim coalesce -o charts/
  irqpilot sim coalesce --device array --policies none,vic,dim -o charts/`,
}

// setExamples fills the Example field of the root ("") and of every verb
// the table names, leaving one a verb sets itself (lab) as it is.
func setExamples(root *cobra.Command) {
	if root.Example == "" {
		root.Example = examples[""]
	}
	var walk func(c *cobra.Command, path string)
	walk = func(c *cobra.Command, path string) {
		for _, sub := range c.Commands() {
			p := sub.Name()
			if path != "" {
				p = path + " " + p
			}
			if ex, ok := examples[p]; ok && sub.Example == "" {
				sub.Example = ex
			}
			walk(sub, p)
		}
	}
	walk(root, "")
}
