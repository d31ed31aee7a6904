package packaging

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The role's metrics address drop-in quotes each word of ExecStart= as
// systemd reads it: a state directory with a space and a double quote, a %
// and a $ reach the agent as given. They were inserted unescaped, so a
// quote ended the word early and % was read as a specifier. Rendered by
// ansible-playbook from the role's own variables.
func TestAnsibleDropInQuotesExecStart(t *testing.T) {
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		t.Skip("no ansible-playbook (Debian package ansible; make deps)")
	}
	role, err := filepath.Abs("../deploy/ansible/roles/irqpilot")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "execstart")
	play := `- hosts: localhost
  connection: local
  gather_facts: false
  vars_files: [` + role + `/defaults/main.yml, ` + role + `/vars/main.yml]
  tasks:
    - ansible.builtin.copy:
        dest: ` + out + `
        content: "ExecStart={{ irqpilot_agent_execstart }}\n"
`
	if err := os.WriteFile(filepath.Join(dir, "play.yml"), []byte(play), 0o644); err != nil {
		t.Fatal(err)
	}
	vars, _ := json.Marshal(map[string]string{
		"irqpilot_state_dir":    `/srv/irq "state" 100%`,
		"irqpilot_plan_path":    `/etc/irq pilot/$plan\.yaml`,
		"irqpilot_agent_listen": ":9477",
	})
	if err := os.WriteFile(filepath.Join(dir, "vars.json"), vars, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ansible-playbook", "-i", "localhost,", "-e", "@"+filepath.Join(dir, "vars.json"), filepath.Join(dir, "play.yml"))
	cmd.Env = append(os.Environ(), "ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"), "ANSIBLE_NOCOLOR=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ansible-playbook: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `ExecStart="/usr/bin/irqpilot" "agent" "--state-dir" "/srv/irq \"state\" 100%%" "--plan" "/etc/irq pilot/$$plan\\.yaml" "--listen" ":9477"` + "\n"
	if string(got) != want {
		t.Errorf("drop-in ExecStart:\n got %s\nwant %s", got, want)
	}
	// The task writes exactly this variable.
	tasks, _ := os.ReadFile(filepath.Join(role, "tasks/main.yml"))
	if !strings.Contains(string(tasks), "ExecStart={{ irqpilot_agent_execstart }}\n") {
		t.Error("the drop-in task does not write irqpilot_agent_execstart")
	}
}
