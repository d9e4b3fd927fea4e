#include "slot_store.h"

#include <chrono>
#include <filesystem>

#include "http_body.h"
#include "openai_response.h"

namespace server {

void SlotStore::Set(int32_t slot, std::vector<llm_token> tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  slots_[slot] = std::move(tokens);
}

std::vector<llm_token> SlotStore::Get(int32_t slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(slot);
  return it == slots_.end() ? std::vector<llm_token>{} : it->second;
}

size_t SlotStore::Erase(int32_t slot) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(slot);
  if (it == slots_.end()) return 0;
  const size_t n = it->second.size();
  slots_.erase(it);
  return n;
}

bool ValidSlotFileName(const std::string& name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return name.find("..") == std::string::npos;
}

namespace {

void Fail(httplib::Response& res, int status, const std::string& param, const std::string& message) {
  ApiError e;
  e.http_status = status;
  e.param = param;
  e.message = message;
  if (status == 501) e.type = "not_supported_error";
  SendError(res, e);
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void SlotAction(const SlotRoutesInfo& info, int32_t slot, const std::string& action, const json& body,
                httplib::Response& res) {
  if (action == "erase") {
    const size_t n = info.store->Erase(slot);
    return SendJson(res, 200, {{"id_slot", slot}, {"n_erased", n}});
  }
  if (action != "save" && action != "restore")
    return Fail(res, 400, "action", "action must be save, restore or erase");
  if (info.save_dir.empty())
    return Fail(res, 501, "action", "slot files are off: start the server with --slot-save-path DIR");
  const auto f = body.find("filename");
  if (f == body.end() || !f->is_string() || !ValidSlotFileName(f->get<std::string>()))
    return Fail(res, 400, "filename",
                "filename must be a plain file name (letters, digits, '.', '_', '-'; no directories, no \"..\")");
  const std::string name = f->get<std::string>();
  const std::string path = (std::filesystem::path(info.save_dir) / name).string();
  const auto t0 = std::chrono::steady_clock::now();
  int32_t n = 0;
  if (action == "save") {
    const std::vector<llm_token> tokens = info.store->Get(slot);
    if (tokens.empty())
      return Fail(res, 400, "id_slot", "slot " + std::to_string(slot) + " holds no conversation to save");
    if (llm_status s = llm_kv_export_file(info.ctx, tokens.data(), static_cast<int32_t>(tokens.size()), 0,
                                          path.c_str(), &n);
        s != LLM_OK)
      return SendError(res, StatusError(s, llm_last_error()));
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    return SendJson(res, 200, {{"id_slot", slot}, {"filename", name}, {"n_saved", n},
                               {"n_written", ec ? 0 : bytes}, {"timings", {{"save_ms", MsSince(t0)}}}});
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return Fail(res, 400, "filename", "no slot file named " + name);
  const auto bytes = std::filesystem::file_size(path, ec);
  if (llm_status s = llm_kv_import_file(info.ctx, 0, path.c_str(), &n); s != LLM_OK) {
    ApiError e = StatusError(s, llm_last_error());
    e.param = "filename";
    return SendError(res, e);
  }
  SendJson(res, 200, {{"id_slot", slot}, {"filename", name}, {"n_restored", n}, {"n_read", ec ? 0 : bytes},
                      {"timings", {{"restore_ms", MsSince(t0)}}}});
}

}  // namespace

void RegisterSlotRoutes(httplib::Server* svr, SlotRoutesInfo info) {
  svr->Post(R"(/slots/(-?\d{1,9}))", [info](const httplib::Request& req, httplib::Response& res,
                                            const httplib::ContentReader& reader) {
    json body = json::object();
    size_t bytes = 0;
    const std::string length = req.get_header_value("Content-Length");
    const bool has_body = (!length.empty() && length != "0") ||
                          req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
    if (has_body && !ReadJsonBody(req, reader, res, &body, &bytes)) return;  // erase needs none
    if (!body.is_object()) return Fail(res, 400, "", "the request body must be a JSON object");
    const int32_t slot = std::stoi(req.matches[1].str());
    if (slot < 0 || slot >= info.total_slots)
      return Fail(res, 400, "id_slot",
                  "id_slot must be from 0 to " + std::to_string(info.total_slots - 1) + " (--max-seqs)");
    SlotAction(info, slot, req.get_param_value("action"), body, res);
  });
}

}  // namespace server
