// Package mediaduration reads the playing time of a reference video or
// audio file from its container headers (MP4, MOV, M4A, WebM, MP3, WAV),
// seeking past the media data, so limits on durations rest on the bytes
// rather than on what a client declares.
package mediaduration
