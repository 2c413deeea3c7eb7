//go:build !faults

package main

import (
	"os"
	"testing"
)

// The binary built without -tags faults (the one shipped, which these
// tests run as the agent and the control plane) has no crash switch: it
// does not even hold the name of the variable that would set one off.
// cpcrash_test.go, in the faults build, checks that the same test finds it
// there.
func TestShippedBuildHasNoCrashSwitch(t *testing.T) {
	t.Parallel()
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if holdsCrashSwitch(bin) {
		t.Fatalf("%s, built without -tags faults, holds %s: the control plane's crash switch ships", os.Args[0], crashSwitchName())
	}
}
