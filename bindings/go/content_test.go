package llmrt

import (
	"errors"
	"strings"
	"testing"
)

// The content-part structs as the Go binding sees them match the pinned ABI
// (tests/test_abi.cpp), and the init function writes its defaults.
func TestContentPartLayout(t *testing.T) {
	partSize, msgSize, off := contentPartLayout()
	if partSize != 40 || msgSize != 24 {
		t.Fatalf("sizeof llm_content_part %d (want 40), llm_chat_message_v2 %d (want 24)", partSize, msgSize)
	}
	want := map[string]uintptr{"part.text": 8, "part.data": 16, "part.n_data": 24, "part.height": 36,
		"msg.parts": 16, "ctx.mmproj_path": 240, "req.parts": 208, "req.n_parts": 216}
	for k, v := range want {
		if off[k] != v {
			t.Errorf("%s at %d, want %d", k, off[k], v)
		}
	}
	if st, size, kind := contentPartInit(); st != 0 || size != 40 || ContentKind(kind) != ContentText {
		t.Fatalf("llm_content_part_init: status %d size %d kind %d", st, size, kind)
	}
	if ContentText != 0 || ContentImage != 1 || ContentImageRGB != 2 {
		t.Fatal("LLM_CONTENT_* values")
	}
}

// Params.MMProjPath reaches llm_ctx_create: a missing projector file is an
// IO error naming it.
func TestMissingProjectorFile(t *testing.T) {
	_, err := Open(&Params{MMProjPath: "/nonexistent/mmproj.gguf"})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want *Error", err)
	}
	if e.Status != StatusIO || !strings.Contains(e.Message, "mmproj") {
		t.Fatalf("status %v message %q", e.Status, e.Message)
	}
}
