package llmrt

/*
#include <stdlib.h>
#include "llm.h"
*/
import "C"

import (
	"strings"
	"unsafe"
)

// ContentKind is llm_content_part.kind (images in the prompt, issue 36).
type ContentKind int32

const (
	ContentText     ContentKind = C.LLM_CONTENT_TEXT      // UTF-8 text
	ContentImage    ContentKind = C.LLM_CONTENT_IMAGE     // PNG, JPEG or WebP bytes
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

// ContentPart is one part of Request.Parts (llm_content_part): text, an
// encoded picture (PNG, JPEG or WebP: the library sniffs the format) or
// Width x Height 8-bit RGB pixels, row after row. Pictures need a context
// opened with Params.MMProjPath.
type ContentPart struct {
	Kind   ContentKind
	Text   string // ContentText
	Data   []byte // ContentImage: the file's bytes; ContentImageRGB: the pixels
	Width  int    // ContentImageRGB
	Height int    // ContentImageRGB
}

// TextPart is a text part.
func TextPart(s string) ContentPart { return ContentPart{Kind: ContentText, Text: s} }

// ImagePart is an encoded picture (the bytes of a PNG, JPEG or WebP file).
func ImagePart(encoded []byte) ContentPart { return ContentPart{Kind: ContentImage, Data: encoded} }

// RGBPart is width x height 8-bit RGB pixels (len(pixels) = width*height*3).
func RGBPart(pixels []byte, width, height int) ContentPart {
	return ContentPart{Kind: ContentImageRGB, Data: pixels, Width: width, Height: height}
}

// setParts copies parts into C memory owned by r and points the request at
// them (no Go pointer reaches the library).
func (r *cRequest) setParts(parts []ContentPart) error {
	arr := (*C.llm_content_part)(r.alloc(C.size_t(len(parts)) * C.sizeof_llm_content_part))
	out := unsafe.Slice(arr, len(parts))
	for i, p := range parts {
		c := &out[i]
		C.llm_content_part_init(c)
		c.kind = C.int32_t(p.Kind)
		if p.Kind == ContentText {
			if strings.IndexByte(p.Text, 0) >= 0 {
				return &Error{Status: StatusInvalidArgument, Message: "a text part contains a NUL byte"}
			}
			c.text = r.cstring(p.Text)
			continue
		}
		if len(p.Data) > 0 {
			buf := r.alloc(C.size_t(len(p.Data)))
			copy(unsafe.Slice((*byte)(buf), len(p.Data)), p.Data)
			c.data = buf
		}
		c.n_data = C.size_t(len(p.Data))
		c.width = C.int32_t(p.Width)
		c.height = C.int32_t(p.Height)
	}
	r.req.parts = arr
	r.req.n_parts = C.int32_t(len(parts))
	return nil
}
