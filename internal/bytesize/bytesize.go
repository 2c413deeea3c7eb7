// Package bytesize says a number of bytes for people, the one way the
// daemon's log notices and the doctor's checks both say it.
package bytesize

import "fmt"

// Text says n bytes for people: 512 KiB, 1.5 MiB, 76.2 GiB.
func Text(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
