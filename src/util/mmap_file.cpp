#include "util/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace llm {

StatusOr<std::unique_ptr<MmapFile>> MmapFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return IoError("cannot stat " + path + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError(path + " is not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return IoError("cannot map " + path + ": " + std::strerror(e));
    }
  }
  ::close(fd);  // the mapping keeps its own reference to the file
  return std::unique_ptr<MmapFile>(new MmapFile(data, size, path));
}

void MmapFile::ReleasePages(const void* p, size_t n) {
  const long page_l = ::sysconf(_SC_PAGESIZE);
  const uintptr_t page = page_l > 0 ? static_cast<uintptr_t>(page_l) : 4096;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;  // first whole page
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n) / page * page;          // end of the last one
  // Pages shared with a neighbouring tensor stay. A failure only leaves the
  // pages resident, as without the call.
  if (e > b) (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

MmapFile::~MmapFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace llm
