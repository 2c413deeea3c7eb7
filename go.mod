module github.com/edgeagent/agent

go 1.26

require (
	github.com/gofrs/flock v0.13.1
	go.uber.org/goleak v1.3.0
)

require golang.org/x/sys v0.47.0 // indirect
