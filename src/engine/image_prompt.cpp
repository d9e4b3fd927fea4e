// Images in the prompt, the engine's side (docs/ARCHITECTURE.md, "Images in
// the prompt"): a projector attached to the engine, a request's pieces laid
// out as positions (Submit), each distinct image encoded once (Admit, on the
// engine thread, through ImageCache).
//
//   pieces   { "A B" } { image 0 } { "C" }
//   prompt   [ A  B  ~  ~  ~  ~  C ]      ~ = placeholder, < 0 (never a token id)
//   spans    { first 2, n 4, hash of image 0 }
//
// An image's positions count against n_ctx, the KV pool and the prompt's
// token usage like text. Its placeholders differ per image and position
// (hash-derived) so a text prompt never matches them; the prefix cache keys
// those blocks by the image's whole hash (kv_cache_manager.cpp, BlockSalt).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <string>

#include "engine/engine.h"
#include "vision/image_tokens.h"

namespace llm {

namespace {

int32_t Placeholder(uint64_t hash, int32_t j) {
  uint64_t z = hash + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(j + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return -1 - static_cast<int32_t>(z & 0x7FFFFFFFu);
}

}  // namespace

Status Engine::AttachVision(std::shared_ptr<const VisionModel> vision, int n_threads) {
  if (vision == nullptr) return InvalidArgument("AttachVision: no projector");
  if (backend_->kind() != LLM_BACKEND_CPU)
    return Unsupported("images in the prompt run on the CPU backend only (the CUDA backend has no embedding-row input yet)");
  // Qwen2.5-VL's spans take M-RoPE positions (core/mrope_positions.h): its
  // pictures only go with a text model that turns them so, and an M-RoPE
  // model only takes pictures that carry a grid.
  if (vision->config.dynamic_size() != model_->config.mrope())
    return Unsupported(vision->config.dynamic_size()
                           ? "Qwen2.5-VL's projector needs a text model with M-RoPE (qwen2vl's rope.dimension_sections)"
                           : "this projector's pictures take 1D positions; the text model turns positions by M-RoPE");
  if (vision->config.n_embd_out != model_->config.n_embd)
    return Status(LLM_ERR_MODEL_FORMAT, "the projector makes rows of " + std::to_string(vision->config.n_embd_out) +
                                            " values; the text model's width is " +
                                            std::to_string(model_->config.n_embd));
  LLM_ASSIGN_OR_RETURN(auto encoder, cpu::CreateCpuVisionEncoder(vision->config, vision->weights, n_threads));
  std::lock_guard<std::mutex> lock(mu_);
  if (vision_ != nullptr) return InvalidArgument("AttachVision: a projector is attached already");
  batch_.set_image_both_ways(ImageTokensFor(vision->config.projector).both_ways);
  vision_model_ = std::move(vision);
  vision_ = std::move(encoder);
  n_image_tokens_.store(vision_model_->config.dynamic_size() ? kImageOwnSize : vision_->n_tokens(),
                        std::memory_order_release);
  return Status::Ok();
}

Status Engine::LayOutImages(RequestSpec* spec) const {
  const int32_t n_fixed = n_image_tokens();
  if (n_fixed == 0) return InvalidArgument("this context has no projector file (mmproj): it cannot take images");
  if (spec->task != LLM_TASK_GENERATE) return Unsupported("images are taken by generation requests only");
  if (!spec->prompt.empty()) return InvalidArgument("a request gives prompt tokens or pieces with images, not both");
  if (spec->pieces.empty()) return InvalidArgument("images are given but no prompt pieces place them");
  if (spec->prompt_logprobs) return Unsupported("prompt logprobs are not given for prompts with images");
  if (spec->kv_produce)
    return Unsupported("a prompt with images cannot be published as a KV stream (the stream keys blocks by token ids)");
  // vision_model_ was set before n_image_tokens_ (release/acquire above).
  // Each image's span: n_fixed soft tokens, or (own size) its grid of
  // merged cells, size_align() pixels a side, and its M-RoPE extent.
  const VisionConfig& vc = vision_model_->config;
  std::vector<ImageSpan> grid(spec->images.size());
  for (size_t i = 0; i < spec->images.size(); ++i) {
    const ImageInput& im = spec->images[i];
    const std::string at = "image " + std::to_string(i);
    int64_t w = vc.image_size, h = vc.image_size;
    if (n_fixed == kImageOwnSize) {
      const int64_t a = vc.size_align();
      w = im.width, h = im.height;
      if (w < a || h < a || w % a != 0 || h % a != 0 || w * h > vc.max_pixels())
        return InvalidArgument(at + " is " + std::to_string(w) + " x " + std::to_string(h) +
                               "; the tower takes sides that are multiples of " + std::to_string(a) +
                               ", at most " + std::to_string(vc.max_pixels()) + " pixels in all");
      grid[i].nx = static_cast<int32_t>(w / a);
      grid[i].n = static_cast<int32_t>((w / a) * (h / a));
      grid[i].n_pos = static_cast<int32_t>(std::max(w, h) / a);
    } else {
      grid[i].n = n_fixed;
    }
    const size_t want = static_cast<size_t>(3 * w * h);
    if (im.pixels.size() != want)
      return InvalidArgument(at + " has " + std::to_string(im.pixels.size()) + " values; the projector's tower takes 3 x " +
                             std::to_string(w) + " x " + std::to_string(h) + " = " + std::to_string(want));
    for (float v : im.pixels)
      if (!std::isfinite(v)) return InvalidArgument(at + " has a value that is not finite");
    if (grid[i].n > config_.max_batch_tokens)
      return InvalidArgument(at + " takes " + std::to_string(grid[i].n) + " positions, more than max_batch_tokens (" +
                             std::to_string(config_.max_batch_tokens) + "), and its span runs in one step");
  }
  std::vector<bool> placed(spec->images.size(), false);
  const int32_t n_vocab = model_->config.n_vocab;
  for (size_t p = 0; p < spec->pieces.size(); ++p) {
    const PromptPiece& piece = spec->pieces[p];
    for (int32_t t : piece.tokens)
      if (t < 0 || t >= n_vocab)
        return InvalidArgument("prompt piece " + std::to_string(p) + " has token id " + std::to_string(t) +
                               ", outside the vocabulary");
    if (piece.image < -1 || piece.image >= static_cast<int>(spec->images.size()))
      return InvalidArgument("prompt piece " + std::to_string(p) + " names image " + std::to_string(piece.image) +
                             " of " + std::to_string(spec->images.size()));
    if (piece.image >= 0) placed[piece.image] = true;
  }
  for (size_t i = 0; i < placed.size(); ++i)
    if (!placed[i]) return InvalidArgument("image " + std::to_string(i) + " is placed by no prompt piece");

  int64_t n = 0;
  for (const PromptPiece& piece : spec->pieces)
    n += static_cast<int64_t>(piece.tokens.size()) + (piece.image >= 0 ? grid[piece.image].n : 0);
  if (n > config_.n_ctx)
    return Status(LLM_ERR_CONTEXT_OVERFLOW, "the prompt takes " + std::to_string(n) + " positions (images included); the context holds " +
                                                std::to_string(config_.n_ctx));
  spec->prompt.reserve(static_cast<size_t>(n));
  for (const PromptPiece& piece : spec->pieces) {
    spec->prompt.insert(spec->prompt.end(), piece.tokens.begin(), piece.tokens.end());
    if (piece.image < 0) continue;
    const uint64_t hash = spec->images[piece.image].hash;
    ImageSpan span = grid[piece.image];
    span.first = static_cast<int32_t>(spec->prompt.size());
    span.hash = hash;
    spec->image_spans.push_back(span);
    spec->span_image.push_back(piece.image);
    for (int32_t j = 0; j < span.n; ++j) spec->prompt.push_back(Placeholder(hash, j));
  }
  spec->pieces.clear();
  // Drafts over placeholders mean nothing, and a draft model never saw the
  // image: such a request decodes without speculation.
  spec->spec_mode = LLM_SPEC_OFF;
  return Status::Ok();
}

Status Engine::EncodeImages(RequestState* r) {
  RequestSpec& spec = r->spec;
  r->image_rows.clear();
  for (size_t k = 0; k < spec.image_spans.size(); ++k) {
    const ImageInput& im = spec.images[spec.span_image[k]];
    const int32_t n_img = spec.image_spans[k].n;
    const size_t n_values = static_cast<size_t>(n_img) * static_cast<size_t>(model_->config.n_embd);
    ImageCache::Rows rows = image_cache_.Find(im.hash);
    if (rows != nullptr && rows->size() != n_values) rows = nullptr;  // (a hash shared by another size)
    if (rows != nullptr) {
      image_cache_hits_.fetch_add(1, std::memory_order_relaxed);
    } else {
      std::shared_ptr<std::vector<float>> fresh;
      try {
        fresh = std::make_shared<std::vector<float>>(n_values);
      } catch (const std::bad_alloc&) {
        return OutOfMemory("no host memory for an image's soft tokens");
      }
      const auto t0 = std::chrono::steady_clock::now();
      if (vision_model_->config.dynamic_size()) {
        LLM_RETURN_IF_ERROR(vision_->EncodeSized(im.pixels, im.width, im.height, fresh->data()));
      } else {
        LLM_RETURN_IF_ERROR(vision_->Encode(im.pixels, fresh->data()));
      }
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
      image_encode_ns_.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
      images_encoded_.fetch_add(1, std::memory_order_relaxed);
      rows = std::move(fresh);
      image_cache_.Put(im.hash, rows);
    }
    r->image_rows.push_back(std::move(rows));
    image_tokens_.fetch_add(static_cast<uint64_t>(n_img), std::memory_order_relaxed);
  }
  spec.images.clear();  // the pixels are not needed once encoded
  spec.images.shrink_to_fit();
  return Status::Ok();
}

}  // namespace llm
