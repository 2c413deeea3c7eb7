// Package bytesize says a number of bytes for people, the one way the
// daemon's log notices and the doctor's checks both say it, and reads one
// written as a setting.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

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

// Tenths says n bytes for people to a tenth of the largest unit that
// fits: 512 B, 3.2 KiB, 1.5 GiB (the outbox's and the health's sizes).
func Tenths(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Units are the units Parse takes: KiB, MiB, GiB, TiB (powers of 1024)
// and KB, MB, GB, TB (powers of 1000), largest first, binary ones first.
var Units = []struct {
	Name string
	N    int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

// Parse reads a size written as a count of bytes (4096) or with a unit of
// Units, case aside (512KiB, 10 GiB).
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRightFunc(t, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' })
	unit := strings.TrimSpace(t[len(num):])
	num = strings.TrimSpace(num)
	mult := int64(1)
	if unit != "" {
		mult = 0
		for _, u := range Units {
			if strings.EqualFold(unit, u.Name) {
				mult = u.N
			}
		}
		if mult == 0 {
			return 0, fmt.Errorf("size %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, unit)
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a whole number of bytes, e.g. 4096, 512KiB or 10GiB", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}
