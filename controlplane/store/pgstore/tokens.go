package pgstore

import (
	"sync"
	"time"
)

// tokensChannel is the channel of PostgreSQL's NOTIFY on which a store
// says an agent's token hash changed (revoked, or replaced by a new
// registration): the payload is the agent's id, sent with the commit.
const tokensChannel = "edgeagent_tokens"

// maxCachedTokens bounds the token cache; past it the cache starts over.
const maxCachedTokens = 100_000

// tokenMaxAge is how long a cached token is trusted: the bound on a
// revocation missed by a listening session that died without a word
// (listen checks its session every listenCheck).
const tokenMaxAge = time.Minute

// tokenCache remembers which agent a token hash belongs to, so that an
// agent's requests (a heartbeat and a claim every few seconds, from each
// of thousands) do not each ask the database. It is trusted only while
// the store listens on tokensChannel (ListenQueued): then every change of
// a hash on any replica reaches it, and empties it, a moment after its
// commit. A lookup that raced a change is not kept: gen counts the
// changes, and a result is kept only if none came while it was asked.
// Only hashes that belong to an agent are kept, each for tokenMaxAge.
type tokenCache struct {
	mu        sync.Mutex
	byHash    map[string]cachedToken
	gen       uint64
	listening bool
}

type cachedToken struct {
	id     string
	expiry time.Time
}

// get returns the agent of hash if the cache holds it, and the generation
// to hand to put after asking the database.
func (c *tokenCache) get(hash string) (id string, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.listening {
		return "", false, c.gen
	}
	t, ok := c.byHash[hash]
	if ok && time.Now().After(t.expiry) {
		delete(c.byHash, hash)
		ok = false
	}
	return t.id, ok, c.gen
}

// put keeps hash's agent, if nothing changed since gen and the cache is
// trusted.
func (c *tokenCache) put(hash, id string, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.listening || c.gen != gen || id == "" {
		return
	}
	if c.byHash == nil || len(c.byHash) >= maxCachedTokens {
		c.byHash = map[string]cachedToken{}
	}
	c.byHash[hash] = cachedToken{id: id, expiry: time.Now().Add(tokenMaxAge)}
}

// reset forgets every hash: one changed (here or on another replica), or
// the store starts or stops listening (listening says which).
func (c *tokenCache) reset(listening bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.byHash = nil
	c.listening = listening
}

// changed forgets every hash, the trust left as it is.
func (c *tokenCache) changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.byHash = nil
}
