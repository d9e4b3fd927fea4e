package llmrt

/*
#include "llm.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
)

// Status is a library status code (LLM_ERR_*).
type Status int32

const (
	StatusOK              Status = C.LLM_OK
	StatusInvalidArgument Status = C.LLM_ERR_INVALID_ARGUMENT
	StatusNullArgument    Status = C.LLM_ERR_NULL_ARGUMENT
	StatusStructSize      Status = C.LLM_ERR_STRUCT_SIZE
	StatusIO              Status = C.LLM_ERR_IO
	StatusModelFormat     Status = C.LLM_ERR_MODEL_FORMAT
	StatusUnsupported     Status = C.LLM_ERR_UNSUPPORTED
	StatusOutOfMemory     Status = C.LLM_ERR_OUT_OF_MEMORY
	StatusBusy            Status = C.LLM_ERR_BUSY
	StatusNotFound        Status = C.LLM_ERR_NOT_FOUND
	StatusContextOverflow Status = C.LLM_ERR_CONTEXT_OVERFLOW
	StatusInvalidUTF8     Status = C.LLM_ERR_INVALID_UTF8
	StatusBufferTooSmall  Status = C.LLM_ERR_BUFFER_TOO_SMALL
	StatusBackend         Status = C.LLM_ERR_BACKEND
	StatusShutdown        Status = C.LLM_ERR_SHUTDOWN
	StatusInternal        Status = C.LLM_ERR_INTERNAL
	StatusKVMismatch      Status = C.LLM_ERR_KV_MISMATCH
	StatusKVCorrupt       Status = C.LLM_ERR_KV_CORRUPT
)

// String gives the library's name for the code ("LLM_ERR_BUSY").
func (s Status) String() string {
	return C.GoString(C.llm_status_str(C.llm_status(s)))
}

// Error is a failed call: the status code and the library's message.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "llmrt: " + e.Status.String()
	}
	return fmt.Sprintf("llmrt: %s: %s", e.Status, e.Message)
}

// Is makes errors.Is(err, &Error{Status: StatusBusy}) match on the status.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Status == e.Status && t.Message == ""
}

// ErrClosed ends the streams of a context that was closed under them.
var ErrClosed = errors.New("llmrt: context closed")

// call runs f and, on failure, reads the message llm_last_error keeps for
// the calling OS thread, so both must run on the same thread.
func call(f func() C.llm_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := f()
	if st == C.LLM_OK {
		return nil
	}
	return &Error{Status: Status(st), Message: C.GoString(C.llm_last_error())}
}
