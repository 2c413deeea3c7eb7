// Package console is the control plane's web console for people: the
// tasks, one task's attempts, events and log, the approvals waiting
// across the fleet (the inbox), and the agents, kept live over
// Server-Sent Events. `agent controlplane serve` serves it on the API's
// own address; /v1/ and /healthz stay the API's.
//
// It promises:
//
//   - Only a person signs in, with an operator token; an agent's token
//     and the registration secret are refused, each with a line saying
//     so, and failed sign-ins are throttled with the API's own count.
//   - A session is a signed cookie (agent_session: HttpOnly,
//     SameSite=Strict, Secure over TLS or when the public URL is https)
//     that holds its expiry (12 h), a random nonce and which operator (a
//     prefix of the SHA-256 of the token), MACed with HMAC-SHA256 under a
//     key derived from that operator's token: it works across replicas
//     and restarts, never holds the token, and ends when the token is
//     removed. Sign-out revokes its nonce in this process.
//   - Every POST but the sign-in carries the session's CSRF token, an
//     HMAC of the session; a POST without it, with a wrong one, from
//     another site (Sec-Fetch-Site) or another origin (Origin) is 403 and
//     changes nothing.
//   - What a task carries (titles, prompts, commands, paths, logs) is
//     escaped by html/template, never trusted as markup; pages run under
//     a strict Content-Security-Policy (no inline script or style).
//   - The console reads and changes nothing itself: every read and every
//     action goes through its Backend, over the server's rules, with
//     the API's errors.
//   - A live stream polls the Backend about once a second and sends only
//     what changed, so another replica's changes show too; it ends when
//     its client goes or the server shuts down, and at most MaxStreams
//     are open at once.
package console
