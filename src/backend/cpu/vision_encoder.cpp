#include "backend/cpu/vision_encoder.h"

#include <optional>
#include <string>
#include <utility>

#include "backend/cpu/gemma3_projector.h"
#include "backend/cpu/idefics3_projector.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/llava_projector.h"
#include "backend/cpu/qwen25vl_vision.h"
#include "backend/cpu/vision_linear.h"
#include "backend/cpu/vision_tower.h"
#include "util/thread_pool.h"

namespace llm::cpu {
namespace {

// The tower, then the family's projector over the tower's patch rows (the
// class token's row, first when the tower has one, is left out).
template <class Projector>
class CpuVision final : public VisionEncoder {
 public:
  CpuVision(const VisionConfig& c, const VisionWeights& w, int n_threads)
      : c_(c), w_(w), pool_(n_threads), tower_(c, w, BestKernels(), pool_), linear_(BestKernels(), pool_) {}

  Status Init() {
    LLM_RETURN_IF_ERROR(tower_.Check());
    LLM_ASSIGN_OR_RETURN(Projector p, Projector::Create(c_, w_, BestKernels()));
    proj_.emplace(std::move(p));
    return Status::Ok();
  }
  int32_t n_tokens() const override { return c_.n_image_tokens(); }
  int32_t n_embd_out() const override { return c_.n_embd_out; }

  Status Encode(const std::vector<float>& pixels, float* out) override {
    const size_t want = 3ull * c_.image_size * c_.image_size;
    if (pixels.size() != want)
      return InvalidArgument("vision encoder: " + std::to_string(pixels.size()) + " pixel values, expected " +
                             std::to_string(want) + " (3 x " + std::to_string(c_.image_size) + " x " +
                             std::to_string(c_.image_size) + ")");
    if (out == nullptr) return InvalidArgument("vision encoder: no output buffer");
    tower_.Run(pixels.data(), &x_);
    const int64_t skip = tower_.n_rows() - c_.n_patches();
    proj_->Run(linear_, x_.data() + skip * c_.n_embd, out);
    return Status::Ok();
  }

 private:
  const VisionConfig& c_;
  const VisionWeights& w_;
  ThreadPool pool_;
  VisionTower tower_;
  VisionLinear linear_;
  std::optional<Projector> proj_;
  std::vector<float> x_;  // (rows, E): the tower's output
};

template <class Projector>
StatusOr<std::unique_ptr<VisionEncoder>> Make(const VisionConfig& c, const VisionWeights& w, int n_threads) {
  auto enc = std::make_unique<CpuVision<Projector>>(c, w, n_threads);
  LLM_RETURN_IF_ERROR(enc->Init());
  return std::unique_ptr<VisionEncoder>(std::move(enc));
}

}  // namespace

StatusOr<std::unique_ptr<VisionEncoder>> CreateCpuVisionEncoder(const VisionConfig& config,
                                                                const VisionWeights& weights, int n_threads) {
  if (n_threads < 1) return InvalidArgument("vision encoder: n_threads must be >= 1");
  switch (config.projector) {
    case ProjectorType::kGemma3: return Make<Gemma3Projector>(config, weights, n_threads);
    case ProjectorType::kIdefics3: return Make<Idefics3Projector>(config, weights, n_threads);
    case ProjectorType::kMlp: return Make<LlavaProjector>(config, weights, n_threads);
    case ProjectorType::kQwen25VL: return CreateQwen25VLVision(config, weights, n_threads);
  }
  return Unsupported("vision encoder: unknown projector type");
}

}  // namespace llm::cpu
