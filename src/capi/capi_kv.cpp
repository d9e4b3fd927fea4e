// extern "C" shims of the KV state functions (llm_kv_*): argument checks,
// the caller's callbacks as the stream's read/write functions, and the file
// helpers. The work is Engine::ExportKv / ImportKv (kvstate/).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <unistd.h>

#include "capi/capi_util.h"

using llm::Status;
using llm::StatusOr;
using llm::capi::Fail;
using llm::capi::Guard;

namespace {

llm_status Export(llm_ctx* ctx, const llm_token* tokens, int32_t n_tokens, uint64_t salt,
                  const llm::kvstate::WriteFn& write, int32_t* out_n_tokens) {
  if (n_tokens < 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "n_tokens is negative");
  if (n_tokens > 0 && tokens == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "tokens is NULL");
  StatusOr<int32_t> n =
      ctx->engine->ExportKv(std::span<const int32_t>(tokens, static_cast<size_t>(n_tokens)), salt, write);
  if (!n.ok()) return Fail(n.status());
  *out_n_tokens = *n;
  return llm::capi::Ok();
}

llm_status Import(llm_ctx* ctx, uint64_t salt, const llm::kvstate::ReadFn& read, int32_t* out_n_tokens) {
  llm::kvstate::ImportResult r = ctx->engine->ImportKv(salt, read);
  // Set on errors too once blocks may have landed (the header was accepted).
  if (r.status.ok() || r.header_ok) *out_n_tokens = r.n_tokens;
  if (!r.status.ok()) return Fail(r.status);
  return llm::capi::Ok();
}

}  // namespace

extern "C" {

LLM_API llm_status llm_kv_export(llm_ctx* ctx, const llm_token* tokens, int32_t n_tokens, uint64_t cache_salt,
                                 llm_kv_write_fn write, void* user_data, int32_t* out_n_tokens) {
  return Guard([&]() -> llm_status {
    LLM_CHECK_ARG(ctx);
    LLM_CHECK_ARG(write);
    LLM_CHECK_ARG(out_n_tokens);
    uint64_t written = 0;
    auto fn = [&](const void* data, size_t n) -> Status {
      if (write(user_data, data, n) != 0)
        return llm::IoError("the KV write callback failed after " + std::to_string(written) + " bytes");
      written += n;
      return Status::Ok();
    };
    return Export(ctx, tokens, n_tokens, cache_salt, fn, out_n_tokens);
  });
}

LLM_API llm_status llm_kv_import(llm_ctx* ctx, uint64_t cache_salt, llm_kv_read_fn read, void* user_data,
                                 int32_t* out_n_tokens) {
  return Guard([&]() -> llm_status {
    LLM_CHECK_ARG(ctx);
    LLM_CHECK_ARG(read);
    LLM_CHECK_ARG(out_n_tokens);
    auto fn = [&](void* buf, size_t n) -> StatusOr<size_t> {
      size_t got = 0;
      if (read(user_data, buf, n, &got) != 0) return llm::IoError("the KV read callback failed");
      if (got > n) return llm::InvalidArgument("the KV read callback reported more bytes than asked for");
      return got;
    };
    return Import(ctx, cache_salt, fn, out_n_tokens);
  });
}

LLM_API llm_status llm_kv_export_file(llm_ctx* ctx, const llm_token* tokens, int32_t n_tokens, uint64_t cache_salt,
                                      const char* path, int32_t* out_n_tokens) {
  return Guard([&]() -> llm_status {
    LLM_CHECK_ARG(ctx);
    LLM_CHECK_ARG(path);
    LLM_CHECK_ARG(out_n_tokens);
    const std::string tmp = std::string(path) + ".tmp-" + std::to_string(::getpid());
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) return Fail(LLM_ERR_IO, "cannot write '" + tmp + "': " + std::strerror(errno));
    auto fn = [&](const void* data, size_t n) -> Status {
      if (std::fwrite(data, 1, n, f) != n) return llm::IoError("cannot write '" + tmp + "': " + std::strerror(errno));
      return Status::Ok();
    };
    int32_t n = 0;
    llm_status st = Export(ctx, tokens, n_tokens, cache_salt, fn, &n);
    if (std::fclose(f) != 0 && st == LLM_OK) st = Fail(LLM_ERR_IO, "cannot write '" + tmp + "': " + std::strerror(errno));
    std::error_code ec;
    if (st == LLM_OK) {
      std::filesystem::rename(tmp, path, ec);
      if (ec) st = Fail(LLM_ERR_IO, "cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
    }
    if (st != LLM_OK) {
      std::filesystem::remove(tmp, ec);
      return st;
    }
    *out_n_tokens = n;
    return LLM_OK;
  });
}

LLM_API llm_status llm_kv_import_file(llm_ctx* ctx, uint64_t cache_salt, const char* path, int32_t* out_n_tokens) {
  return Guard([&]() -> llm_status {
    LLM_CHECK_ARG(ctx);
    LLM_CHECK_ARG(path);
    LLM_CHECK_ARG(out_n_tokens);
    std::FILE* f = std::fopen(path, "rb");
    if (f == nullptr) return Fail(LLM_ERR_IO, std::string("cannot open '") + path + "': " + std::strerror(errno));
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
    auto fn = [&](void* buf, size_t n) -> StatusOr<size_t> {
      const size_t got = std::fread(buf, 1, n, f);
      if (got < n && std::ferror(f)) return llm::IoError(std::string("cannot read '") + path + "'");
      return got;
    };
    return Import(ctx, cache_salt, fn, out_n_tokens);
  });
}

}  // extern "C"
