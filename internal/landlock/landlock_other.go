//go:build !linux

package landlock

// ABI is 0: Landlock is Linux's.
func ABI() int { return 0 }

// Probe says there is none: Landlock is Linux's.
func Probe() (int, error) { return 0, ErrUnsupported }

// RestrictThread confines nothing here: Landlock is Linux's.
func RestrictThread(Policy) (int, error) { return 0, ErrUnsupported }
