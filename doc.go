// Package sluice holds the concepts of the gateway (docs/architecture.md, "Concepts"): protocols,
// endpoints, accounts, credentials, edges, aliases, keys, requests, usage and
// the public error codes. It imports only the standard library; every other
// package of the gateway builds on it.
package sluice
