package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/console"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// An approval link answers one question from a notification, without a
// sign-in: the link is the credential, for that question and that answer
// alone, until it expires, once.
//
//	PUBLIC_URL/approve/PAYLOAD.MAC
//
// PAYLOAD is the base64url of {"t": TASK, "r": REQUEST, "d": DECISION,
// "e": EXPIRY (Unix seconds), "n": NONCE} and MAC its HMAC-SHA256, keyed
// with the store's secret "approval-link" (shared by every replica, held
// by no agent host). Opening the link shows the question and a button
// (GET changes nothing: a link preview or a mail scanner answers
// nothing); the button POSTs it. A link used is kept in the store's
// revoked nonces until it would have expired, so a second use does
// nothing; the question answered by any other means, or gone, makes it
// do nothing either (the answer names its request).

// approvalLinkLife bounds a link's life when its question waits for ever.
const approvalLinkLife = 24 * time.Hour

// approvalLinkPrefix marks a link's nonce among the store's revoked
// nonces (console sessions keep theirs there too).
const approvalLinkPrefix = "approval-link:"

// linkPayload is what an approval link says.
type linkPayload struct {
	Task     string       `json:"t"`
	Request  string       `json:"r"`
	Decision api.Decision `json:"d"`
	Expiry   int64        `json:"e"`
	Nonce    string       `json:"n"`
}

// approvalLinkKey is the links' key: the store's secret "approval-link".
func approvalLinkKey(st store.Store) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, err := st.Secret(ctx, "approval-link", 32)
	if err != nil {
		return nil, fmt.Errorf("controlplane: the approval links' key: %w", err)
	}
	return key, nil
}

// approvalActions are the links that accept and decline question q of
// task id, or nil when the control plane has no public address to put
// in a link (--public-url).
func (rl *rules) approvalActions(id string, q *state.ApprovalRequest) *api.NotifyActions {
	if rl.opts.PublicURL == "" || q == nil {
		return nil
	}
	key := rl.linkKey
	expiry := rl.opts.Now().Add(approvalLinkLife)
	if !q.Deadline.IsZero() && q.Deadline.Before(expiry) {
		expiry = q.Deadline
	}
	link := func(d api.Decision) string {
		b := make([]byte, 12)
		rand.Read(b)
		p, _ := json.Marshal(linkPayload{Task: id, Request: q.ID, Decision: d, Expiry: expiry.Unix(), Nonce: hex.EncodeToString(b)})
		payload := base64.RawURLEncoding.EncodeToString(p)
		return rl.link("/approve/" + payload + "." + base64.RawURLEncoding.EncodeToString(linkMAC(key, payload)))
	}
	return &api.NotifyActions{Accept: link(api.DecisionAccept), Decline: link(api.DecisionDecline), Expires: expiry.UTC()}
}

func linkMAC(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("approval link v1\x00"))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// errLink is why a link does nothing, said to whoever opened it.
func errLink(kind errKind, msg string) error { return consoleErr(&ruleError{kind, msg}) }

// readLink checks an approval link's token: its MAC, its expiry, and that
// it was not used.
func (rl *rules) readLink(ctx context.Context, token string) (linkPayload, error) {
	var p linkPayload
	payload, mac, ok := strings.Cut(token, ".")
	sum, err := base64.RawURLEncoding.DecodeString(mac)
	if !ok || err != nil || len(token) > 1024 {
		return p, errLink(errNotFound, "this approval link is not one the control plane made")
	}
	if !hmac.Equal(sum, linkMAC(rl.linkKey, payload)) {
		return p, errLink(errNotFound, "this approval link is not one the control plane made")
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(b, &p) != nil || p.Task == "" || p.Nonce == "" ||
		p.Decision != api.DecisionAccept && p.Decision != api.DecisionDecline {
		return p, errLink(errNotFound, "this approval link is not one the control plane made")
	}
	if !rl.opts.Now().Before(time.Unix(p.Expiry, 0)) {
		return p, errLink(errGone, "this approval link has expired: answer from the console's inbox")
	}
	used, err := rl.store.SessionRevoked(ctx, approvalLinkPrefix+p.Nonce)
	if err != nil {
		return p, consoleErr(storeErr("read the approval links used", err))
	}
	if used {
		return p, errLink(errGone, "this approval link was used already")
	}
	return p, nil
}

// ApprovalLink reads an approval link: the task and the question it
// answers, and the answer; an expired, used, altered or foreign link is
// refused, saying which.
func (b consoleBackend) ApprovalLink(ctx context.Context, token string) (console.Approval, error) {
	p, err := b.rules.readLink(ctx, token)
	if err != nil {
		return console.Approval{}, err
	}
	t, err := b.rules.store.Task(ctx, p.Task)
	if err != nil {
		return console.Approval{}, consoleErr(storeErr("read task", err))
	}
	if t == nil || t.Phase != state.PhaseAwaitingReply || t.AwaitingReply == nil || t.AwaitingReply.ID != p.Request {
		return console.Approval{}, errLink(errGone, "the question this link answers is not waiting any more")
	}
	return console.Approval{Task: api.ViewOf(t), Decision: p.Decision, Expires: time.Unix(p.Expiry, 0).UTC()}, nil
}

// UseApprovalLink answers the question an approval link names, with its
// answer, once: the link is kept used until it would have expired.
func (b consoleBackend) UseApprovalLink(ctx context.Context, token string) (api.TaskView, error) {
	p, err := b.rules.readLink(ctx, token)
	if err != nil {
		return api.TaskView{}, err
	}
	v, err := b.rules.replyTask(ctx, p.Task, api.ReplyRequest{RequestID: p.Request, Decision: p.Decision})
	if err != nil {
		return api.TaskView{}, consoleErr(err)
	}
	if err := b.rules.store.RevokeSession(ctx, approvalLinkPrefix+p.Nonce, time.Unix(p.Expiry, 0), b.rules.opts.Now()); err != nil {
		// Answered all the same; a second use answers nothing new (the
		// question is answered).
		b.rules.log.Warn("an approval link used could not be kept used", "task", p.Task, "err", err)
	}
	b.rules.log.Info("approval answered by a notification's link", "task", p.Task, "request", p.Request, "decision", p.Decision)
	return v, nil
}
