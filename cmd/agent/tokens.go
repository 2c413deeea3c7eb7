package main

import "github.com/edgeagent/agent/controlplane/credential"

// readToken reads the control plane token from a file, else from
// AGENT_TOKEN, and refuses a file others may read and a short token.
func readToken(file string) (string, error) { return tokenFromFile(file, true) }

// readTokenForDoctor is readToken without the file's permission check:
// agent doctor reports that itself, with the fix, beside the other checks.
func readTokenForDoctor(file string) (string, error) { return tokenFromFile(file, false) }

func tokenFromFile(file string, checkPerm bool) (string, error) {
	if file != "" {
		return credential.ReadTokenFile("token file", file, checkPerm)
	}
	tok, err := credential.FromEnv()
	if err == nil && tok == "" {
		return "", usagef("no control plane token: give --token-file FILE or set AGENT_TOKEN")
	}
	return tok, err
}
