// Package usagelog makes usage rows durable and writes them to the ledger.
// Every row is first appended to a local journal (a small set of
// preallocated files written in place, spool.go), group-committed and, with
// DurableDisk, fdatasynced before it is acknowledged; the journal's rows
// then go to the ledger in large batches. While the database is
// unreachable the rows wait in the journal, and they are replayed when it
// returns or when the next process starts on the same spool.
package usagelog
