//go:build !linux

package main

// undumpable does nothing here: PR_SET_DUMPABLE is Linux's.
func undumpable() {}
