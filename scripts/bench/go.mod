module github.com/edgeagent/agent/scripts/bench

go 1.26.0

replace github.com/edgeagent/agent => ../..

require (
	github.com/edgeagent/agent v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.12.0
	github.com/nsqio/go-diskqueue v1.1.0
	github.com/tidwall/wal v1.2.1
	golang.org/x/sys v0.48.0
)

require (
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/gofrs/flock v0.13.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/natefinch/atomic v1.0.1 // indirect
	github.com/tidwall/gjson v1.10.2 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/tidwall/tinylru v1.1.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)
