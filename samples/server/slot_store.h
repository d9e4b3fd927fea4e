// llama-server's slot files, on llmrt's KV state files (llm_kv_export_file /
// llm_kv_import_file, docs/KV_FORMAT.md):
//   POST /slots/{id}?action=save     {"filename"} -> {"id_slot", "filename", "n_saved", "n_written",
//                                    "timings": {"save_ms"}}
//   POST /slots/{id}?action=restore  {"filename"} -> {"id_slot", "filename", "n_restored", "n_read",
//                                    "timings": {"restore_ms"}}
//   POST /slots/{id}?action=erase    -> {"id_slot", "n_erased"}
// Sequences are not pinned to slots here: a slot is the name of the last
// conversation a /completion request ran with that "id_slot" (its prompt and
// output ids, its KV kept in the prefix cache by keep_kv). Saving writes
// that conversation's KV to a file in --slot-save-path; restoring imports a
// file into the prefix cache, where the next request with that prefix finds
// it (whatever its slot). File names are plain names inside the directory
// (no separators, no "..": 400). Without --slot-save-path, save and restore
// are 501.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "llm.h"

namespace server {

// The last conversation of each slot id. Thread-safe.
class SlotStore {
 public:
  void Set(int32_t slot, std::vector<llm_token> tokens);
  std::vector<llm_token> Get(int32_t slot) const;
  size_t Erase(int32_t slot);  // the number of tokens forgotten

 private:
  mutable std::mutex mu_;
  std::map<int32_t, std::vector<llm_token>> slots_;
};

struct SlotRoutesInfo {
  llm_ctx* ctx = nullptr;
  SlotStore* store = nullptr;  // outlives the server
  std::string save_dir;        // --slot-save-path; "" = save/restore disabled
  int32_t total_slots = 0;     // ids 0 .. total_slots - 1
};

// True when `name` may name a file inside the save directory.
bool ValidSlotFileName(const std::string& name);

void RegisterSlotRoutes(httplib::Server* svr, SlotRoutesInfo info);

}  // namespace server
