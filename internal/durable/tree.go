package durable

import (
	"io/fs"
	"path/filepath"
)

// TreeBytes is what the files under dir take, links counted as links and
// never followed; what cannot be read is not counted.
func TreeBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
