package handlers

// offStack runs fn on a goroutine of its own and waits for it.
//
// A goroutine's stack never shrinks below twice what is in use on it (the
// collector halves a stack only when under a quarter of it is used), so a
// stream that waits on the stack its admission and upstream call grew to
// 8 KiB holds 8 KiB for its whole life. HTTP/2 runs each request's handler on
// a goroutine of its own, and a stream's wait needs about 2.3 KiB of it: with
// the deep work on another goroutine, whose stack goes back to the runtime
// when it returns, the stream's stays at 4 KiB.
//
// A panic in fn is raised again on the caller's goroutine, where the
// server's recovery (and http.ErrAbortHandler) expects it.
func offStack(fn func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}
