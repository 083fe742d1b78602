// Package files stores the files of OpenAI's Files API for the Batches API:
// batch input files streamed into the blob store under a size limit, the
// output and error files a batch writes, their tenant-scoped records in the
// ledger, and the sweep that deletes expired files with their blobs.
package files
