// Package metrics exports the agent's and the reference control plane's
// figures in the Prometheus text format, on an address of their own
// (--metrics-addr; off by default), at /metrics and nowhere else.
//
// Promises:
//
//   - Bounded cardinality. Every label takes its values from a closed set:
//     phase (state.Phases), grade (health grades), outcome (attempt
//     statuses), code (state.ErrorCode's values; anything else is
//     "other"), result (the fixed sets below), route (the API's route
//     patterns; "/v1/" for a request no API route served, such as one
//     with a wrong token; "unmatched" for any other path), code of a
//     response (the few statuses the API answers). No task id, agent id,
//     key or path is ever a label.
//   - Loopback unless asked otherwise: an address without a host ("9464"
//     or ":9464") listens on 127.0.0.1; a host ("0.0.0.0:9464") is taken
//     as given. The figures carry no secret, but the agent runs on a
//     workstation.
//   - Cheap when off, and cheap to scrape: gauges are read at scrape time
//     from what the agent keeps anyway (outbox.Stats, the task files, the
//     health tracker, the control plane's memory); only what happens in
//     between (deliveries, attempts, heartbeats, syncs, requests) is
//     counted as it happens.
//   - The server stops with its owner: Close returns once no goroutine of
//     it is left.
//
// The agent (prefix agent_):
//
//	agent_outbox_pending_records              gauge                    records not yet delivered
//	agent_outbox_dead_records                 gauge                    records the control plane refused for good
//	agent_outbox_file_bytes                   gauge                    bytes of records in outbox.jsonl (not its zeroed stretch)
//	agent_outbox_oldest_pending_age_seconds   gauge                    age of the oldest pending record (0 when none)
//	agent_outbox_appends_total                counter                  records appended (durably) by this process
//	agent_outbox_dropped_logs_total           counter                  log records refused because the outbox was full
//	agent_outbox_write_errors_total           counter                  group commits whose write or sync failed
//	agent_outbox_sync_duration_seconds        histogram                fdatasync latency of each group commit
//	agent_outbox_commit_records               histogram                records per group commit
//	agent_sends_total                         counter   result         records by what a delivery try made of them: sent, duplicate, dead, failed
//	agent_tasks                               gauge     phase          tasks in the data directory by phase
//	agent_attempts_total                      counter   outcome, code  attempts ended: completed, failed or cancelled, and the error code (none when completed)
//	agent_executor_health                     gauge     grade          1 for the executor's grade, 0 for the others
//	agent_heartbeat_duration_seconds          histogram result         heartbeat round trips: ok or failed
//
// The reference control plane (prefix agent_controlplane_):
//
//	agent_controlplane_agents                   gauge     state        agents known, by state: running, draining, offline
//	agent_controlplane_tasks                    gauge     phase        tasks by phase
//	agent_controlplane_events_total             counter   result       events answered: accepted, duplicate, rejected
//	agent_controlplane_notifications_total      counter   target, result  notification deliveries: delivered, failed, given_up, dropped
//	agent_controlplane_request_duration_seconds histogram route, code  API requests by route pattern and status
//
// Both also export the Go runtime's and the process's figures under the
// names the Prometheus Go client's default collectors give them:
// go_goroutines, go_threads, go_info, go_sched_gomaxprocs_threads,
// go_gc_gogc_percent, go_gc_gomemlimit_bytes, go_gc_duration_seconds (a
// summary of GC pauses), the 22 go_memstats_* figures, and
// process_cpu_seconds_total, process_start_time_seconds, process_open_fds,
// process_max_fds, process_virtual_memory_max_bytes, and, from /proc on
// Linux, process_resident_memory_bytes and process_virtual_memory_bytes.
// Only process_network_* are left out.
//
// The exposition is written by this package (registry.go says why); the
// tests read every scrape back with Prometheus' own parser.
package metrics
