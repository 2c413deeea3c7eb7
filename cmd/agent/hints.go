package main

import (
	"os"
	"strings"

	"github.com/edgeagent/agent/internal/taskview"
)

// newHint makes the commands the tools suggest to a person ("run it again
// with: …") work as printed, for commands that reach the control plane
// with f's settings (nil: none known).
func newHint(f *cpFlags) taskview.CommandHint {
	var url, tokenFile string
	var insecure bool
	if f != nil {
		url, tokenFile, insecure = f.url, f.tokenFile, f.insecure
	}
	return taskview.NewCommandHint(invokedAs(), url, tokenFile, strings.TrimSpace(os.Getenv("AGENT_TOKEN")) != "", insecure)
}

// invokedAs is how the person invoked this binary (taskview.InvokedAs).
func invokedAs() string { return taskview.InvokedAs(os.Args[0]) }
