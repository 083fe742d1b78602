// Package batches holds the file formats of a Batch (OpenAI's Batches API):
// reading and checking the JSONL input file, the deterministic per-line
// request IDs that make a line's reservation and usage row idempotent, and
// the output and error lines.
package batches
