// Package sluice holds the concepts of the gateway (DESIGN.md §2): protocols,
// endpoints, accounts, credentials, edges, aliases, keys, requests, usage and
// the public error codes. It imports only the standard library; every other
// package of the gateway builds on it.
package sluice
