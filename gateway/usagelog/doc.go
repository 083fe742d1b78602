// Package usagelog writes usage rows to the ledger in batches from a bounded
// queue, spooling them to a local append-only file while the database is
// unreachable and replaying them when it returns.
package usagelog
