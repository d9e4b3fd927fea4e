// A read-only memory mapping of a whole file, released on destruction.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "util/status.h"

namespace llm {

class MmapFile {
 public:
  // Maps `path` read-only. A missing, unreadable or non-regular file is
  // LLM_ERR_IO. An empty file maps to data() == nullptr, size() == 0.
  static StatusOr<std::unique_ptr<MmapFile>> Open(const std::string& path);

  ~MmapFile();
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  // Drops this process's resident pages of [p, p + n), a range inside a
  // read-only private file mapping that nothing has written: the pages wholly
  // inside the range leave the resident set at once and, if read again,
  // fault back in from the file with the same bytes (MADV_DONTNEED). For
  // data that has been copied elsewhere (packed weights): without it the
  // copy and the mapped original would both stay resident.
  static void ReleasePages(const void* p, size_t n);

  const void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MmapFile(void* data, size_t size, std::string path)
      : data_(data), size_(size), path_(std::move(path)) {}

  void* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace llm
