// Content parts (llm_content_part): the checks every part gets, the
// context's projector file (llm_ctx_params.mmproj_path), and a request's
// parts turned into what the engine's image path takes
// (engine/image_input.h): the prompt as pieces of tokens and pictures, each
// picture decoded and preprocessed for the projector's tower.
#include <cstring>
#include <string>
#include <vector>

#include "capi/capi_util.h"
#include "core/defaults.h"
#include "util/utf8.h"
#include "vision/image_decode.h"
#include "vision/image_prep.h"
#include "vision/image_tokens.h"

namespace llm::capi {

namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// One part's picture, as 8-bit RGB.
StatusOr<RgbImage> PartPicture(const llm_content_part& p, const std::string& at) {
  if (p.kind == LLM_CONTENT_IMAGE) {
    if (p.width != 0 || p.height != 0)
      return InvalidArgument(at + ": width and height must be 0 for LLM_CONTENT_IMAGE (the file gives the size)");
    auto img = DecodeImage(static_cast<const uint8_t*>(p.data), p.n_data);
    if (!img.ok()) return Status(img.status().code(), at + ": " + img.status().message());
    return img;
  }
  if (Status s = CheckImageSize(p.width, p.height, ImageLimits{}); !s.ok())
    return InvalidArgument(at + ": LLM_CONTENT_IMAGE_RGB " + s.message().substr(s.message().find(':') + 2));
  const size_t want = static_cast<size_t>(p.width) * static_cast<size_t>(p.height) * 3;
  if (p.n_data != want)
    return InvalidArgument(at + ": n_data is " + Str(static_cast<int64_t>(p.n_data)) + " but width * height * 3 is " +
                           Str(static_cast<int64_t>(want)));
  RgbImage img;
  img.width = p.width;
  img.height = p.height;
  const auto* b = static_cast<const uint8_t*>(p.data);
  img.rgb.assign(b, b + want);
  return img;
}

size_t CountMarkers(std::string_view text, std::string_view marker) {
  size_t n = 0;
  for (size_t at = text.find(marker); at != std::string_view::npos; at = text.find(marker, at + marker.size())) ++n;
  return n;
}

// The prompt as a list of text runs and pictures (see llm.h, llm_request.parts).
struct Segment {
  std::string text;
  int image = -1;             // a tower input (images[image]), or -1: text
  bool marker = false;        // a picture's begin or end marker (tokenized on its own)
  std::vector<int32_t> ids;   // fixed: tokens as they are (a tiled layout's single tokens)
  bool fixed = false;
};

// The token whose text (special tokens rendered) is `piece`, the lowest id
// first, as llama.cpp's multimodal library finds its layout tokens; -1 when
// the vocabulary has none.
int32_t TokenByPiece(const Tokenizer& tok, std::string_view piece) {
  std::string s;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    s.clear();
    tok.AppendPiece(id, /*render_special=*/true, &s);
    if (s == piece) return id;
  }
  return -1;
}

}  // namespace

llm_status CheckPartHeader(const llm_content_part& p, const std::string& at) {
  if (p.struct_size != sizeof(llm_content_part))
    return Fail(LLM_ERR_STRUCT_SIZE, at + ".struct_size is " + Str(p.struct_size) + "; set it to sizeof(llm_content_part)");
  switch (p.kind) {
    case LLM_CONTENT_TEXT:
      if (p.text == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, at + ".text is NULL");
      return LLM_OK;
    case LLM_CONTENT_IMAGE:
    case LLM_CONTENT_IMAGE_RGB:
      if (p.data == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, at + ".data is NULL");
      if (p.n_data == 0) return Fail(LLM_ERR_INVALID_ARGUMENT, at + ".n_data is 0");
      if (p.n_data > defaults::kMaxImageBytes)
        return Fail(LLM_ERR_INVALID_ARGUMENT, at + ".n_data is " + Str(static_cast<int64_t>(p.n_data)) +
                                                  ", more than the limit of " + Str(defaults::kMaxImageBytes) + " bytes");
      return LLM_OK;
    default:
      return Fail(LLM_ERR_INVALID_ARGUMENT, at + ".kind " + Str(p.kind) + " is not an LLM_CONTENT_* value");
  }
}

StatusOr<std::shared_ptr<const VisionModel>> OpenProjector(const char* path, const Model& model) {
  auto vm = VisionModel::Open(path);
  if (!vm.ok()) return Status(vm.status().code(), std::string("mmproj_path: ") + vm.status().message());
  const VisionConfig& vc = (*vm)->config;
  if (vc.n_embd_out != model.config.n_embd)
    return Status(LLM_ERR_MODEL_FORMAT, "mmproj_path: the projector's output width " + Str(vc.n_embd_out) +
                                            " is not the text model's n_embd " + Str(model.config.n_embd) +
                                            " (a projector for another model)");
  const ImageTokens it = ImageTokensFor(vc.projector);
  if (model.config.arch != it.arch)
    return Status(LLM_ERR_MODEL_FORMAT, "mmproj_path: the projector is for \"" + std::string(it.arch) +
                                            "\" models; the text model is \"" + model.config.arch + "\"");
  return std::shared_ptr<const VisionModel>(std::move(*vm));
}

llm_status ToPromptParts(const llm_request& r, const llm_ctx& ctx, std::vector<PromptPiece>* pieces,
                         std::vector<ImageInput>* images) {
  if (r.reserved6 != 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "reserved6 must be 0");
  if (r.n_parts <= 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "n_parts must be > 0 when parts is set");
  int32_t n_images = 0;
  for (int32_t i = 0; i < r.n_parts; ++i) {
    const std::string at = "parts[" + Str(i) + "]";
    if (llm_status s = CheckPartHeader(r.parts[i], at); s != LLM_OK) return s;
    if (r.parts[i].kind == LLM_CONTENT_TEXT) {
      if (!IsValidUtf8(r.parts[i].text)) return Fail(LLM_ERR_INVALID_UTF8, at + ".text is not valid UTF-8");
    } else {
      ++n_images;
    }
  }
  if (n_images > defaults::kMaxImagesPerRequest)
    return Fail(LLM_ERR_INVALID_ARGUMENT, Str(n_images) + " image parts; at most " +
                                              Str(defaults::kMaxImagesPerRequest) + " per request");
  if (n_images > 0 && ctx.vision == nullptr)
    return Fail(LLM_ERR_INVALID_ARGUMENT, "the request has image parts but the context has no projector file "
                                          "(llm_ctx_params.mmproj_path)");
  const Tokenizer& tok = *ctx.engine->model().tokenizer;

  // The pictures, in order, each decoded and prepared for the tower: one
  // tower input, or (tiled families) its tiles and overview.
  struct Picture {
    int first = 0;  // its first input in *images
    int32_t grid_x = 0, grid_y = 0;
  };
  std::vector<Picture> pictures;
  for (int32_t i = 0; i < r.n_parts; ++i) {
    const llm_content_part& p = r.parts[i];
    if (p.kind == LLM_CONTENT_TEXT) continue;
    auto img = PartPicture(p, "parts[" + Str(i) + "]");
    if (!img.ok()) return Fail(img.status());
    const VisionConfig& vc = ctx.vision->config;
    auto prepared = PrepareForTower(*img, vc);
    if (!prepared.ok()) return Fail(Status(prepared.status().code(), "parts[" + Str(i) + "]: " + prepared.status().message()));
    pictures.push_back({static_cast<int>(images->size()), prepared->grid_x, prepared->grid_y});
    for (std::vector<float>& px : prepared->pixels) {
      ImageInput in;
      in.pixels = std::move(px);
      in.width = prepared->width;
      in.height = prepared->height;
      in.hash = HashImagePixels(in.pixels);
      // an own-size picture's grid is part of its identity (28 x 56 and
      // 56 x 28 of the same values are two pictures)
      if (vc.dynamic_size()) in.hash = HashImageSize(in.hash, in.width, in.height);
      images->push_back(std::move(in));
    }
  }

  // The layout: pictures at the template's markers when the text has them,
  // else where their parts stand.
  const ImageTokens it = n_images > 0 ? ImageTokensFor(ctx.vision->config.projector) : ImageTokens{};
  size_t n_markers = 0;
  if (n_images > 0)
    for (int32_t i = 0; i < r.n_parts; ++i)
      if (r.parts[i].kind == LLM_CONTENT_TEXT) n_markers += CountMarkers(r.parts[i].text, it.marker);
  if (n_markers > 0 && n_markers != static_cast<size_t>(n_images))
    return Fail(LLM_ERR_INVALID_ARGUMENT, "the text holds " + Str(static_cast<int64_t>(n_markers)) + " image markers (" +
                                              std::string(it.marker) + ") for " + Str(n_images) + " image parts");
  // a tiled layout's single tokens
  int32_t row_end = -1, overview_end = -1;
  std::vector<int32_t> overview_begin;
  if (it.tiled && n_images > 0) {
    for (std::string_view piece : {it.row_end_piece, it.overview_begin_pieces[0], it.overview_begin_pieces[1],
                                   it.overview_begin_pieces[2], it.overview_end_piece}) {
      const int32_t id = TokenByPiece(tok, piece);
      if (id < 0)
        return Fail(LLM_ERR_MODEL_FORMAT, "the text model's vocabulary has no token \"" + std::string(piece) +
                                              "\", which this projector's image layout needs");
      if (piece == it.row_end_piece) row_end = id;
      else if (overview_begin.size() < 3) overview_begin.push_back(id);
      else overview_end = id;
    }
  }
  std::vector<Segment> segs;
  int next_image = 0;
  auto add_text = [&](std::string_view t) {  // the caller's text: consecutive runs join
    if (t.empty()) return;
    if (!segs.empty() && segs.back().image < 0 && !segs.back().marker && !segs.back().fixed) {
      segs.back().text += t;
    } else {
      segs.push_back({std::string(t), -1, false, {}, false});
    }
  };
  auto add_ids = [&](std::vector<int32_t> ids) { segs.push_back({"", -1, false, std::move(ids), true}); };
  auto add_image = [&]() {
    const Picture& pic = pictures[next_image++];
    if (!it.tiled) {
      if (!it.begin.empty()) segs.push_back({std::string(it.begin), -1, true, {}, false});
      segs.push_back({"", pic.first, false, {}, false});
      if (!it.end.empty()) segs.push_back({std::string(it.end), -1, true, {}, false});
      return;
    }
    for (int32_t y = 0; y < pic.grid_y; ++y) {
      for (int32_t x = 0; x < pic.grid_x; ++x) {
        segs.push_back({TilePrefix(y + 1, x + 1), -1, true, {}, false});
        segs.push_back({"", pic.first + y * pic.grid_x + x, false, {}, false});
      }
      if (y != pic.grid_y - 1) add_ids({row_end});
    }
    add_ids(overview_begin);
    segs.push_back({"", pic.first + pic.grid_x * pic.grid_y, false, {}, false});
    add_ids({overview_end});
  };
  for (int32_t i = 0; i < r.n_parts; ++i) {
    const llm_content_part& p = r.parts[i];
    if (p.kind != LLM_CONTENT_TEXT) {
      if (n_markers == 0) add_image();
      continue;
    }
    std::string_view text(p.text);
    if (n_markers > 0)
      for (size_t at = text.find(it.marker); at != std::string_view::npos; at = text.find(it.marker)) {
        add_text(text.substr(0, at));
        add_image();
        text.remove_prefix(at + it.marker.size());
      }
    add_text(text);
  }

  // Each stretch of the caller's text between pictures, and each picture's
  // begin and end marker, is tokenized on its own, as llama.cpp's multimodal
  // tokenizer does (mtmd_tokenize: one tokenizer call per text part and per
  // marker, so a tokenizer that adds a space prefix adds it to each): BOS
  // (ADD_SPECIAL) before the first only; the markers always parse special
  // tokens (a vocabulary without them spells them out), and with pictures
  // the caller's text does too.
  const bool add_special = (r.tokenize_flags & LLM_TOKENIZE_ADD_SPECIAL) != 0;
  const bool parse_special = (r.tokenize_flags & LLM_TOKENIZE_PARSE_SPECIAL) != 0 || n_images > 0;
  for (size_t k = 0; k < segs.size(); ++k) {
    if (segs[k].image >= 0) {
      pieces->push_back({{}, segs[k].image});
      continue;
    }
    StatusOr<std::vector<int32_t>> ids = segs[k].ids;
    if (!segs[k].fixed) ids = tok.Encode(segs[k].text, k == 0 && add_special, segs[k].marker || parse_special);
    if (!ids.ok()) return Fail(ids.status());
    if (!pieces->empty() && pieces->back().image < 0) {  // text after text: one piece
      pieces->back().tokens.insert(pieces->back().tokens.end(), ids->begin(), ids->end());
    } else {
      pieces->push_back({std::move(*ids), -1});
    }
  }
  if (pieces->empty() || (pieces->size() == 1 && pieces->front().image < 0 && pieces->front().tokens.empty()))
    return Fail(LLM_ERR_INVALID_ARGUMENT, "the parts make an empty prompt");
  return LLM_OK;
}

}  // namespace llm::capi

extern "C" {

LLM_API llm_status llm_content_part_init(llm_content_part* part) {
  LLM_CHECK_ARG(part);  // NOLINT
  std::memset(part, 0, sizeof(*part));
  part->struct_size = sizeof(*part);
  part->kind = LLM_CONTENT_TEXT;
  return llm::capi::Ok();
}

}  // extern "C"
