//go:build !faults

package filestore

// at never fires: a build without -tags faults has no crash switch.
func (crashBatch) at(crashPoint) bool { return false }

// crash is never called: no crash point fires in this build.
func crash() {
	panic("controlplane/store/filestore: a crash point fired in a build without -tags faults")
}
