package agentview

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/taskview"
)

// List prints agents ls's text: the table, or that no agent has been
// heard from at the control plane at url.
func List(w io.Writer, agents []api.AgentView, url string, now time.Time) {
	if len(agents) == 0 {
		fmt.Fprintf(w, "no agent has been heard from at %s\n", url)
		return
	}
	Table(w, agents, now)
}

// Table prints agents as a table, a line each.
func Table(w io.Writer, agents []api.AgentView, now time.Time) {
	tw := taskview.NewTable(w)
	fmt.Fprintln(tw, "AGENT\tSTATE\tHEALTH\tEXECUTOR\tMODELS\tHEARTBEAT\tRUNNING\tTASKS\tREPOS\tLABELS\tSELF-DESCRIBED\tPLATFORM\tREPLICA")
	for _, a := range agents {
		tasks := make([]string, len(a.Running))
		for i, r := range a.Running {
			tasks[i] = fmt.Sprintf("%s (attempt %d)", r.TaskID, r.Attempt)
		}
		// Routing by capability: what it advertises, and the labels a
		// person granted it (docs/routing.md).
		platform := ""
		if a.OS != "" || a.Arch != "" {
			platform = a.OS + "/" + a.Arch
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d of %d\t%s\t%s\t%s\t%s\t%s\t%s\n", taskview.Visible(a.AgentID), State(a), taskview.Dash(taskview.Visible(string(a.Health.Grade))),
			taskview.Dash(taskview.Visible(a.Executor)), taskview.Dash(taskview.Visible(strings.Join(a.Models, ","))),
			taskview.Ago(now, a.LastHeartbeat), a.Capacity.Running, a.Capacity.Max, taskview.Dash(taskview.Visible(strings.Join(tasks, ", "))), taskview.Dash(taskview.Visible(strings.Join(a.Repos, ","))),
			taskview.Dash(taskview.Visible(LabelsText(a.GrantedLabels))), taskview.Dash(taskview.Visible(LabelsText(a.Labels))), taskview.Dash(taskview.Visible(platform)), taskview.Dash(taskview.Visible(a.Replica)))
	}
	tw.Flush()
}

// LabelsText is labels as KEY=VALUE pairs, sorted, comma-separated; ""
// when there are none.
func LabelsText(labels map[string]string) string {
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	return strings.Join(pairs, ",")
}

// LabelChanges reads agents label's arguments: KEY=VALUE to grant, KEY-
// to take back. A mistake names the argument.
func LabelChanges(args []string) (api.LabelsRequest, error) {
	var req api.LabelsRequest
	for _, a := range args {
		if k, ok := strings.CutSuffix(a, "-"); ok && !strings.Contains(a, "=") {
			if err := api.CheckLabels(map[string]string{k: ""}); err != nil {
				return req, fmt.Errorf("%q: %v", a, err)
			}
			req.Remove = append(req.Remove, k)
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return req, fmt.Errorf("%q: want KEY=VALUE to grant a label, or KEY- to take one back", a)
		}
		if req.Set == nil {
			req.Set = map[string]string{}
		}
		if _, dup := req.Set[k]; dup {
			return req, fmt.Errorf("%q: label %s is given twice", a, k)
		}
		req.Set[k] = v
		if err := api.CheckLabels(map[string]string{k: v}); err != nil {
			return req, fmt.Errorf("%q: %v", a, err)
		}
	}
	return req, nil
}

// State is what an agent is, as a person reads it: offline once the
// control plane finds it silent, whatever it last said; else what its
// last heartbeat said (running when it said nothing).
func State(a api.AgentView) string {
	switch {
	case !a.Online:
		return string(api.AgentOffline)
	case a.State == "":
		return string(api.AgentRunning)
	}
	return taskview.Visible(string(a.State))
}
