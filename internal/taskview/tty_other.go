//go:build !linux && !darwin

package taskview

import (
	"errors"
	"os"
)

// keyMode is not available here: the watch ends with Ctrl-C only.
func keyMode(*os.File) (func(), error) { return nil, errors.New("no terminal modes on this platform") }

// termSize is 80×24 where the platform does not say.
func termSize(*os.File) (width, height int) { return 80, 24 }
