package llmrt

/*
#include "llm.h"
*/
import "C"

import "unsafe"

// ContentKind is llm_content_part.kind (images in the prompt, issue 36).
type ContentKind int32

const (
	ContentText     ContentKind = C.LLM_CONTENT_TEXT      // UTF-8 text
	ContentImage    ContentKind = C.LLM_CONTENT_IMAGE     // PNG or JPEG bytes
	ContentImageRGB ContentKind = C.LLM_CONTENT_IMAGE_RGB // width x height 8-bit RGB
)

// contentPartLayout reports sizeof(llm_content_part), sizeof(llm_chat_message_v2)
// and the offsets of the fields a caller fills, as cgo sees the header (the
// ABI pins of tests/test_abi.cpp, checked by content_test.go).
func contentPartLayout() (partSize, msgSize uintptr, offsets map[string]uintptr) {
	var p C.llm_content_part
	var m C.llm_chat_message_v2
	var cp C.llm_ctx_params
	var r C.llm_request
	return unsafeSizeof(p), unsafeSizeof(m), map[string]uintptr{
		"part.text": unsafeOffsetof(&p, &p.text), "part.data": unsafeOffsetof(&p, &p.data),
		"part.n_data": unsafeOffsetof(&p, &p.n_data), "part.height": unsafeOffsetof(&p, &p.height),
		"msg.parts": unsafeOffsetof(&m, &m.parts), "ctx.mmproj_path": unsafeOffsetof(&cp, &cp.mmproj_path),
		"req.parts": unsafeOffsetof(&r, &r.parts), "req.n_parts": unsafeOffsetof(&r, &r.n_parts),
	}
}

// contentPartInit runs llm_content_part_init and returns what it wrote.
func contentPartInit() (status int, structSize uint32, kind int32) {
	var p C.llm_content_part
	st := C.llm_content_part_init(&p)
	return int(st), uint32(p.struct_size), int32(p.kind)
}

func unsafeSizeof[T any](v T) uintptr { return unsafe.Sizeof(v) }

func unsafeOffsetof[S any, F any](base *S, field *F) uintptr {
	return uintptr(unsafe.Pointer(field)) - uintptr(unsafe.Pointer(base))
}
