package llmrt

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
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

// synthVision writes llm-synth's tiny-gemma3 and its projector into a temp
// folder; skips without llm-synth (LLMRT_SYNTH, else the repository's
// build/bin).
func synthVision(t *testing.T) (model, mmproj string) {
	synth := os.Getenv("LLMRT_SYNTH")
	if synth == "" {
		synth = filepath.Join("..", "..", "build", "bin", "llm-synth")
	}
	if _, err := os.Stat(synth); err != nil {
		t.Skip("llm-synth not found (LLMRT_SYNTH)")
	}
	dir := t.TempDir()
	model, mmproj = filepath.Join(dir, "g3.gguf"), filepath.Join(dir, "mmproj.gguf")
	cmd := exec.Command(synth, "--shape", "tiny-gemma3", "--out", model, "--type", "f32", "--seed", "7", "--mmproj", mmproj)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("llm-synth: %v\n%s", err, out)
	}
	return model, mmproj
}

// A picture through Request.Parts on tiny-gemma3 + its projector: the PNG
// and the same pixels given raw (Pillow's decode in tests/data/images) give
// the same greedy tokens; the picture's 16 soft tokens are prompt
// positions; a raw picture of the wrong size is refused.
func TestImagePartsThroughTheBinding(t *testing.T) {
	model, mmproj := synthVision(t)
	c, err := Open(&Params{ModelPath: model, MMProjPath: mmproj, ContextLength: 512, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	images := filepath.Join("..", "..", "tests", "data", "images")
	png, err := os.ReadFile(filepath.Join(images, "rgb.png"))
	if err != nil {
		t.Fatal(err)
	}
	rgb, err := os.ReadFile(filepath.Join(images, "rgb.png.rgb"))
	if err != nil {
		t.Fatal(err)
	}
	g := Greedy()
	run := func(parts ...ContentPart) (*Result, error) {
		return c.Complete(context.Background(), Request{Parts: parts, MaxTokens: 6, IgnoreEOS: true, Sampling: &g})
	}
	a, err := run(TextPart("Describe: "), ImagePart(png))
	var e *Error
	if errors.As(err, &e) && e.Status == StatusUnsupported {
		t.Skip("built without the image codecs: ", e.Message)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := run(TextPart("Describe: "), RGBPart(rgb, 17, 11))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Tokens()) != 6 || !reflect.DeepEqual(a.Tokens(), b.Tokens()) {
		t.Fatalf("PNG %v, raw RGB %v: want the same 6 tokens", a.Tokens(), b.Tokens())
	}
	text, err := run(TextPart("Describe: "))
	if err != nil {
		t.Fatal(err)
	}
	pa, pt := a.Sequences[0].Metrics.PromptTokens, text.Sequences[0].Metrics.PromptTokens
	if pa < pt+16 {
		t.Fatalf("prompt tokens %d with the picture, %d without: want its 16 positions", pa, pt)
	}
	_, err = run(TextPart("x"), RGBPart(rgb[:len(rgb)-1], 17, 11))
	if !errors.As(err, &e) || e.Status != StatusInvalidArgument {
		t.Fatalf("a short RGB part: %v, want InvalidArgument", err)
	}
}
