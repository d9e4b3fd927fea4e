#include "backend/cpu/vision_encoder.h"

#include <optional>
#include <string>

#include "backend/cpu/gemma3_projector.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/qwen25vl_vision.h"
#include "backend/cpu/vision_linear.h"
#include "backend/cpu/vision_tower.h"
#include "util/thread_pool.h"

namespace llm::cpu {
namespace {

class CpuGemma3Vision final : public VisionEncoder {
 public:
  CpuGemma3Vision(const VisionConfig& c, const VisionWeights& w, int n_threads, Gemma3Projector proj)
      : c_(c), pool_(n_threads), tower_(c, w, BestKernels(), pool_), linear_(BestKernels(), pool_),
        proj_(std::move(proj)) {}

  Status Check() const { return tower_.Check(); }
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
    proj_.Run(linear_, x_.data(), out);
    return Status::Ok();
  }

 private:
  const VisionConfig& c_;
  ThreadPool pool_;
  VisionTower tower_;
  VisionLinear linear_;
  Gemma3Projector proj_;
  std::vector<float> x_;  // (N, E): the tower's output
};

}  // namespace

StatusOr<std::unique_ptr<VisionEncoder>> CreateCpuVisionEncoder(const VisionConfig& config,
                                                                const VisionWeights& weights, int n_threads) {
  if (n_threads < 1) return InvalidArgument("vision encoder: n_threads must be >= 1");
  if (config.projector == ProjectorType::kQwen25VL) return CreateQwen25VLVision(config, weights, n_threads);
  if (config.projector != ProjectorType::kGemma3) return Unsupported("vision encoder: unknown projector type");
  LLM_ASSIGN_OR_RETURN(Gemma3Projector proj, Gemma3Projector::Create(config, weights));
  auto enc = std::make_unique<CpuGemma3Vision>(config, weights, n_threads, std::move(proj));
  LLM_RETURN_IF_ERROR(enc->Check());
  return std::unique_ptr<VisionEncoder>(std::move(enc));
}

}  // namespace llm::cpu
