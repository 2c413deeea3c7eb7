//go:build !linux

package landlock

// ABI is 0: Landlock is Linux's.
func ABI() int { return 0 }

// Probe says there is none: Landlock is Linux's.
func Probe() (int, error) { return 0, ErrUnsupported }

// RestrictThread confines nothing here: Landlock is Linux's.
func RestrictThread(Policy) (int, error) { return 0, ErrUnsupported }

// Ruleset is nothing here: Landlock is Linux's.
type Ruleset struct{}

// Prepare makes no rules here: Landlock is Linux's.
func Prepare(Policy) (*Ruleset, error) { return nil, ErrUnsupported }

// RestrictThread confines nothing here.
func (*Ruleset) RestrictThread() (int, error) { return 0, ErrUnsupported }

// Close drops nothing.
func (*Ruleset) Close() {}
