// Package hooks delivers lethe's audit events to webhooks: durably, signed,
// at least once, and never to an address inside the network.
//
// # Outbox
//
// A delivery is a row that the store inserts in the same transaction as the
// audit event it carries (one per hook of the event's memory that asks for
// the event's type), so a crash loses none and none exists for a change that
// did not commit. An [Engine] claims due deliveries whose event the
// sequencer has numbered, sends them, and deletes each once its receiver
// answered 2xx. A claim is a lease with an expiry: on PostgreSQL the claim
// takes its rows with FOR UPDATE SKIP LOCKED, on SQLite in one UPDATE under
// the database's write lock. Replicas (several engines over one database)
// never send the same delivery at the same time; a replica that dies with a
// lease leaves it to expire and another sends it again (at least once: the
// webhook-id lets a receiver drop the repeat).
//
// # Scheduling
//
// An engine claims due deliveries ahead and sends each from its own
// goroutine as soon as its bounds let it start: [Config].Workers sends
// under way in all, PerHook per hook, PerMemory per memory. A send that
// ends frees its place for the next held delivery; none waits for a batch.
// What an engine holds is bounded per hook, per memory and in all too, and
// a claim takes nothing of a hook or a memory that holds its share, so
// slow or dead receivers hold up no other memory's deliveries: the hooks
// of one memory never occupy more than PerMemory places (one hook no more
// than PerHook of them), and claims reach past their deliveries to the
// others'. Only Workers/PerMemory memories whose receivers all hang could
// fill an engine. Accepted deliveries are
// recorded in groups, one write for those accepted while the previous
// write ran.
//
// # Registry
//
// A [Registry] manages a DB's hooks: it creates them (checking the URL
// against the address guard and wrapping the signing secret with the KEK),
// lists, removes and rotates them, shows and redrives the undelivered
// deliveries, rewraps the secrets during a KEK rotation, and runs the
// delivery engine when [Settings].Deliver is set. It reads the store
// through its [HookStore] port.
//
// # Retries
//
// A failed attempt (no answer, a non-2xx status, a refused address) is
// retried after an exponential backoff with full jitter ([Backoff]); once
// the delivery is older than [Config.MaxAge] or has had [Config.MaxAttempts]
// attempts, it goes to the dead-letter state, where it stays, visible, until
// it is redelivered by hand.
//
// # Pauses
//
// A hook's circuit breaker ([Circuit], [Breaker]) spares a receiver that
// is down the retries of every pending delivery: after
// [Config].PauseAfter consecutive failed attempts of a hook, of any of
// its deliveries, no delivery of it is claimed for [Config].Pause; then
// one at a time (a probe), until one is accepted, which resumes the hook,
// or fails, which pauses it again for twice as long, at most
// [Config].MaxPause. Deliveries held back are not attempted and spend no
// attempt; an engine releases, unsent, what it held of a hook when it
// learns of its pause. The circuit is a row of the store, the hook's:
// every engine over the database shares it, and one claim in all takes a
// probe. MaxAge runs during a pause: the failure that pauses a hook
// dead-letters its deliveries the pause carries past MaxAge, attempted
// or not. A redelivery ends the pause (the next claim takes a probe).
//
// # Signatures
//
// Every request is signed as the Standard Webhooks specification says
// (https://www.standardwebhooks.com, github.com/standard-webhooks): headers
// webhook-id, webhook-timestamp and webhook-signature, the latter
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" under the secret whose
// text form is "whsec_<base64>". While a rotated secret overlaps its
// successor, the header holds both signatures, space-separated.
//
// # Payloads
//
// A payload holds the event id, its type, the memory, the audit leaf index,
// the path of its proof and the audit leaf itself (hashes, counts, digests,
// key fingerprints, commitments: never subjects, content or user ids). It
// stays meaningful after the memory is erased.
//
// # Addresses
//
// [Guard] refuses URLs whose host resolves to a loopback, private,
// link-local, CGNAT, multicast, unspecified, reserved or cloud metadata
// address, or to an IPv6 address that embeds an IPv4 one (one table of
// ranges, [Blocked]), when a hook is created and again on every connection (a dialer
// control function checks the address actually connected to, so DNS
// rebinding does not get through). Redirects are not followed, and timeouts
// and the response bytes read are bounded.
package hooks
