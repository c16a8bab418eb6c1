// Package mcp is lethe's Model Context Protocol server, built on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk/mcp), so that AI
// agents use lethe as a native tool.
//
// # Tools
//
// add, recall, supersede, history and forget are always offered;
// forget_user and erase_scope (crypto-erasure) only when [Config.Eraser] is
// set (the --allow-erase flag); the erasure request workflow
// (erasure_request_create, _list, _show, _approve, _reject, _execute) only
// when [Config.Requester] is set (--allow-requests). Its four-eyes rule is
// the library's: the actor that filed a request cannot approve it, so over
// HTTP a second token approves, and on the embedded store (one actor,
// "local") approval comes from outside the session. A locked session cannot
// use the request tools. Every tool has a JSON Schema for its input
// and for its structured result, and annotations that say what it does:
// readOnlyHint on recall and history, destructiveHint on forget and the
// erasures, idempotentHint on add (a duplicate returns the existing hash)
// and supersede (a second call fails without effect).
//
// # Forgetting
//
// forget follows linksee-memory's forget tool (its src/mcp/server.ts): a
// forget that would delete a protected grain (a protected type such as
// caveat or goal, pinned, or importance at or above the policy's threshold)
// returns an error result (isError) whose structured content has
// "preserved": true, a "reason" and a "hint", and changes nothing. The
// server never overrides protection. forget with no target runs the risk
// sweep; with dry_run it reports what the sweep would drop and compress. A
// forget by subject or user_id forgets the grains the caller can recall
// (superseded and archived included) by their hashes, so the library's
// protection check covers them too. A dry run by target is computed through
// read paths (the library has no dry run for Forget): recall, get and
// history. Recall records a retrieval of what it returns, so a dry run by
// subject or user_id bumps those grains' retrieval statistics; it changes
// nothing else.
//
// # Locks
//
// [Config.LockNamespace] and [Config.LockScope] pin a session to one
// partition of one memory: adds get the locked values, recalls are confined
// to them, and a call that names another memory, namespace or scope (a scope
// outside the locked path) is refused with code forbidden. A grain outside
// the lock is not_found, with a missing grain's message, so the session
// cannot tell another partition's grain from no grain; a list of hashes
// forgets those inside and passes over the others; a chain with a version
// outside the lock (an erased one included) is forbidden to forget
// (checked again in the delete's transaction, [lethe.Selector].Scopes and
// [lethe.Selector].Namespace, so that a version a concurrent supersede adds
// outside is refused, never deleted; a Library that is an HTTP client,
// lethe mcp --server, sends them in the REST forget's scopes and namespace,
// which the server checks in its delete's transaction with its token's
// scopes);
// history leaves out versions outside the lock, and no grain the session
// reads links to one (supersedes, superseded_by). These are the rules of
// a scope-limited API token: both apply a grains.View. The risk sweep spans a memory, so a locked
// session may only preview it (only the items inside the lock are
// reported); forget_user is refused under any lock, erase_scope under a
// namespace lock or outside the locked scope.
//
// # Resources
//
// lethe://{memory}/grains/{hash} is a grain, lethe://{memory}/grains/{hash}/history
// its version chain (newest first), both as JSON. A refused read is the
// JSON-RPC error [CodeRefused] with lethe's code, field and hint.
//
// # Transports and authorization
//
// [New] returns a server for one [Library]: cmd/lethe runs it over stdio
// ([StdioTransport], which answers a line that is not JSON-RPC with a
// JSON-RPC error and reads on) on the embedded store, or on an HTTP client
// of a lethe server whose token's roles and scopes then apply. [NewHandler] serves the streamable HTTP
// transport, stateless, so any replica answers any request; with
// [Config.Resolve] each call gets the Library of its own HTTP request's
// bearer token. lethe serve mounts it at /mcp behind the API's bearer-token
// authentication and resolves every call to the API itself, in process,
// with that token.
//
// # Personal data
//
// The server logs nothing of its own. Error results carry the library's
// codes, messages and hints, which never quote personal values. The SDK's
// own messages for arguments that do not match a tool's input schema, for
// a tool name it does not offer, and for an HTTP body that is not
// JSON-RPC, quote the value sent: the server checks all three first and
// answers code invalid_argument with the field and the problem instead
// (an unknown tool keeps the SDK's JSON-RPC error code, -32602). A key
// repeated in one object of a message (outside a tool call's arguments,
// which the tool's check refuses) is a JSON-RPC error naming its path, on
// both transports, before the server reads the message.
package mcp
