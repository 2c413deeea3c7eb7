//go:build !faults

package server

// at never fires: a build without -tags faults has no crash switch.
func (crashBatch) at(crashPoint) bool { return false }

// crash is never called: no crash point fires in this build.
func crash() { panic("controlplane/server: a crash point fired in a build without -tags faults") }
