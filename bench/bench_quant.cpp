// bench_quant: the block-quantized matmul kernel alone, one thread (or -j N:
// the rows split in N runs of whole 8-row groups, one std::thread each).
//
// For each weight type and shape (rows x cols, SmolLM2-135M's by default) and
// each token count, runs Kernels::matmul over all rows and reports GMAC/s
// (multiply-adds of weights with activations per second), the median of -r
// repetitions. Weights are random bytes with sane scales; activations are
// quantized once outside the timing, as the backend does per matmul.
//
// usage: bench_quant [-r reps] [-t type(q4_0|q4_1|q5_0|q5_1|q8_0|q2_k|q3_k|q4_k|q5_k|q6_k|
//                                      iq4_nl|iq4_xs|mxfp4|iq3_xxs|iq3_s|iq2_xs|iq2_xxs|iq2_s|iq1_s|iq1_m)]
//                    [-n n_tok[,n_tok...]] [-s ROWSxCOLS] [-j threads] [--1b] [--generic] [--no-pack]
//                    [--cold] [--cpu]
//
// -s replaces the default shapes by one (e.g. 2048x2048 or 8192x2048, the
// 1B shape's projections, whose 2048 columns are whole 256-weight blocks).
// --1b takes Llama-3.2-1B's four shapes (2048 x 2048 q/o, 512 x 2048 k/v,
// 8192 x 2048 gate/up, 2048 x 8192 down): rows of whole 256-weight
// super-blocks, which the K-quants and the lattice types need (of SmolLM2's
// default shapes only 576x1536 qualifies).
//
// --cold flushes the weights (and their packed copy) from every cache level
// before each repetition, so the kernel streams them from memory as in a
// decode step of a model larger than the caches; GB/s then reports the
// weight bytes read per second.
//
// --cpu times each repetition by the process's CPU time (divided by the
// thread count) instead of the wall clock: on a shared machine the time a
// thread waits descheduled then does not count.
//
// By default weights that the CPU backend would repack (Q4_0, Q4_1, Q8_0:
// quant_pack.h) are repacked here too; --no-pack measures the row-major path.
#include <algorithm>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_pack.h"
#include "model/tensor_type.h"
#include "model/weights.h"

namespace {

using Clock = std::chrono::steady_clock;

struct TypeName {
  const char* name;
  llm::TensorType type;
};
const TypeName kTypes[] = {{"q4_0", llm::TensorType::Q4_0}, {"q4_1", llm::TensorType::Q4_1},
                           {"q5_0", llm::TensorType::Q5_0}, {"q5_1", llm::TensorType::Q5_1},
                           {"q8_0", llm::TensorType::Q8_0}, {"q4_k", llm::TensorType::Q4_K},
                           {"q5_k", llm::TensorType::Q5_K}, {"q6_k", llm::TensorType::Q6_K},
                           {"iq4_nl", llm::TensorType::IQ4_NL}, {"iq4_xs", llm::TensorType::IQ4_XS},
                           {"mxfp4", llm::TensorType::MXFP4},
                           {"q2_k", llm::TensorType::Q2_K}, {"q3_k", llm::TensorType::Q3_K},
                           {"iq3_xxs", llm::TensorType::IQ3_XXS}, {"iq3_s", llm::TensorType::IQ3_S},
                           {"iq2_xs", llm::TensorType::IQ2_XS}, {"iq2_xxs", llm::TensorType::IQ2_XXS},
                           {"iq2_s", llm::TensorType::IQ2_S}, {"iq1_s", llm::TensorType::IQ1_S},
                           {"iq1_m", llm::TensorType::IQ1_M}};

// Random quant bytes; every 16-bit field that may be an F16 scale gets a small
// normal half (0x2000..0x27ff: about 0.008..0.03), so no block holds inf/NaN.
std::vector<uint8_t> RandomMatrix(llm::TensorType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  int64_t be = 0, bb = 0;
  llm::TensorTypeLayout(t, &be, &bb);
  std::vector<uint8_t> m(static_cast<size_t>(rows * (cols / be) * bb));
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : m) b = static_cast<uint8_t>(byte(rng));
  const int64_t n_blocks = rows * (cols / be);
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = m.data() + b * bb;
    const int off = t == llm::TensorType::Q6_K ? 208 : t == llm::TensorType::Q3_K ? 108 : t == llm::TensorType::Q2_K ? 80 : 0;
    const int n_f16 = (t == llm::TensorType::Q4_1 || t == llm::TensorType::Q5_1 || t == llm::TensorType::Q4_K ||
                       t == llm::TensorType::Q5_K || t == llm::TensorType::Q2_K) ? 2 : 1;
    for (int i = 0; i < n_f16; ++i) {
      const uint16_t h = static_cast<uint16_t>(0x2000 | (byte(rng) << 3) | (byte(rng) & 1) << 15);
      std::memcpy(blk + off + 2 * i, &h, 2);
    }
    if (t == llm::TensorType::MXFP4) blk[0] = static_cast<uint8_t>(120 + byte(rng) % 8);  // E8M0: 2^-8 .. 2^-1
  }
  return m;
}

// Writes back and drops [p, p + n) from every cache level.
void Flush(const void* p, size_t n) {
#if defined(__x86_64__)
  const char* c = static_cast<const char*>(p);
  for (size_t off = 0; off < n; off += 64) _mm_clflush(c + off);
  _mm_mfence();
#else
  (void)p;
  (void)n;
#endif
}

// CPU time of the whole process in milliseconds.
double CpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 9;
  int threads = 1;
  std::vector<std::string> types = {"q4_1", "q8_0"};
  std::vector<int64_t> toks = {1, 4, 16, 64};
  // SmolLM2-135M: q/o, k/v, gate/up, down, and the 49152-row classifier.
  bool generic = false, pack = true, cold = false, cpu_time = false;
  std::vector<std::vector<int64_t>> shapes = {{576, 576}, {192, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--generic") { generic = true; continue; }
    if (a == "--1b") {
      shapes = {{2048, 2048}, {512, 2048}, {8192, 2048}, {2048, 8192}};
      continue;
    }
    if (a == "--no-pack") { pack = false; continue; }
    if (a == "--cold") { cold = true; continue; }
    if (a == "--cpu") { cpu_time = true; continue; }
    if (i + 1 >= argc) { std::fprintf(stderr, "missing value after %s\n", a.c_str()); return 2; }
    const std::string v = argv[++i];
    if (a == "-r") reps = std::max(1, std::atoi(v.c_str()));
    else if (a == "-t") types = {v};
    else if (a == "-j") threads = std::max(1, std::atoi(v.c_str()));
    else if (a == "-s") shapes = {{std::atoll(v.c_str()), std::atoll(v.c_str() + v.find('x') + 1)}};
    else if (a == "-n") {
      toks.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) toks.push_back(std::max<int64_t>(1, std::atoll(item.c_str())));
    } else {
      std::fprintf(stderr, "usage: bench_quant [-r reps] [-t type] [-n n_tok,...] [-s RxC] [-j threads] [--1b] [--generic] [--no-pack] [--cold] [--cpu]\n");
      return 2;
    }
  }
  const llm::cpu::Kernels& k = generic ? llm::cpu::GenericKernels() : llm::cpu::BestKernels();
  std::printf("kernels: %s, %d thread(s), median of %d, %s, weights %s, %s\n", k.name, threads, reps,
              pack ? "packed rows" : "row-major", cold ? "flushed from the caches" : "in cache",
              cpu_time ? "CPU time / threads" : "wall clock");
  std::printf("%-7s %7s %6s %6s %10s %10s %10s %8s\n", "type", "rows", "cols", "n_tok", "ms", "GMAC/s", "best", "GB/s");
  std::mt19937 rng(7);
  for (const std::string& tn : types) {
    const TypeName* tp = nullptr;
    for (const TypeName& c : kTypes) if (tn == c.name) tp = &c;
    if (tp == nullptr) { std::fprintf(stderr, "unknown type %s\n", tn.c_str()); return 2; }
    for (const auto& s : shapes) {
      const int64_t rows = s[0], cols = s[1];
      int64_t be = 0, bb = 0;
      llm::TensorTypeLayout(tp->type, &be, &bb);
      if (cols % be != 0) continue;
      const std::vector<uint8_t> m = RandomMatrix(tp->type, rows, cols, rng);
      llm::WeightView w;
      w.type = tp->type;
      w.data = m.data();
      w.rows = rows;
      w.cols = cols;
      w.row_bytes = llm::TensorRowBytes(tp->type, cols);
      std::vector<uint8_t> packed;
      if (pack && llm::cpu::CanPackR8(w)) {
        packed.resize(llm::cpu::PackedR8Bytes(w));
        if (llm::cpu::PackR8(w, packed.data())) w.packed = packed.data();
      }
      for (int64_t n_tok : toks) {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(n_tok * cols));
        for (float& v : x) v = nd(rng);
        std::vector<llm::cpu::BlockQ8Act> xq(static_cast<size_t>(n_tok * cols / 32));
        k.quantize_act(x.data(), n_tok * cols, xq.data());
        std::vector<float> y(static_cast<size_t>(n_tok * rows));
        llm::cpu::MatMulArgs a;
        a.w = &w;
        a.x = x.data();
        a.ld_x = cols;
        a.xq = xq.data();
        a.ld_xq = cols / 32;
        a.n_tok = n_tok;
        a.y = y.data();
        a.ld_y = rows;
        a.row_begin = 0;
        a.row_end = rows;
        // Thread i computes rows [row_at(i), row_at(i + 1)): whole 8-row groups.
        auto row_at = [&](int i) { return std::min(rows, (rows / 8 * i + threads - 1) / threads * 8); };
        auto run = [&]() {
          if (threads == 1) { k.matmul(a); return; }
          std::vector<std::thread> pool;
          for (int i = 1; i < threads; ++i)
            pool.emplace_back([&, i]() {
              llm::cpu::MatMulArgs b = a;
              b.row_begin = row_at(i);
              b.row_end = i + 1 == threads ? rows : row_at(i + 1);
              k.matmul(b);
            });
          llm::cpu::MatMulArgs b = a;
          b.row_end = row_at(1);
          k.matmul(b);
          for (std::thread& t : pool) t.join();
        };
        run();  // warm-up
        std::vector<double> ms;
        // the bytes the kernel reads: the packed copy when there is one
        const size_t w_bytes = w.packed != nullptr ? packed.size() : m.size();
        for (int r = 0; r < reps; ++r) {
          if (cold) Flush(w.packed != nullptr ? w.packed : w.data, w_bytes);
          const auto t0 = Clock::now();
          const double c0 = CpuMs();
          run();
          ms.push_back(cpu_time ? (CpuMs() - c0) / threads
                                : std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        std::sort(ms.begin(), ms.end());
        const double med = ms[ms.size() / 2];
        const double macs = static_cast<double>(rows) * cols * n_tok;
        // median, and the fastest repetition (the least disturbed by other load)
        std::printf("%-7s %7lld %6lld %6lld %10.3f %10.2f %10.2f %8.2f\n", tn.c_str(), static_cast<long long>(rows),
                    static_cast<long long>(cols), static_cast<long long>(n_tok), med, macs / (med * 1e6),
                    macs / (ms.front() * 1e6), static_cast<double>(w_bytes) / (med * 1e6));
      }
    }
  }
  return 0;
}
