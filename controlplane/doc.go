// Package controlplane is the client of the control plane API: the one
// way the agent and the command line reach a control plane. It speaks the
// wire types of package api and nothing else; the reference server is in
// package controlplane/server, which nothing here imports.
//
// What it promises:
//
//   - The token never leaves the Authorization header: no error, log line
//     or URL it returns holds it, and it follows no redirect, which could
//     carry the token to another host.
//   - A URL that is not loopback must be https unless Insecure is set
//     (CheckURL).
//   - Requests that are safe to repeat (events, heartbeats, reads) are
//     tried again on a transient failure (Transient), with backoff;
//     claims and task creation are tried once.
//   - Events go one batch a call, within the API's limits
//     (api.MaxEventsPerBatch, about api.MaxBatchBytes), which the caller
//     makes; one result per event, in order.
//   - Lists are read a page after another (api.NextAfterHeader) until the
//     last.
//   - An agent's client registers for the agent's own token when it has
//     none or the control plane no longer knows it, and says so when the
//     control plane refuses for good (Refused).
package controlplane
