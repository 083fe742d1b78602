// Package uploads stores uploaded images and audio: type detection from the
// bytes, a size limit enforced while streaming into the blob store, and the
// sweeper that deletes expired uploads and their blobs.
package uploads
